#include "checkpoint/torch_archive.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstring>
#include <set>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_io.h"
#include "common/error.h"

namespace ddp::core {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  fail(Status::IO, "checkpoint " + name + ": " + what);
}

// The globals a torch.save file of tensors, containers, numbers and strings
// names (Python's weights_only allow-list, less what LibTorch cannot build).
bool allowed_global(const std::string& module, const std::string& name) {
  static const std::set<std::string> storages = {
      "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
      "ShortStorage", "CharStorage",   "ByteStorage", "BoolStorage"};
  if (module == "torch._utils") return name == "_rebuild_tensor_v2";
  if (module == "collections") return name == "OrderedDict";
  if (module == "torch") return storages.count(name) != 0;
  if (module == "torch.jit._pickle")
    return name == "build_intlist" || name == "build_doublelist" || name == "build_boollist" ||
           name == "build_tensorlist" || name == "build_genericlist";
  return false;
}

// Walks the pickle's opcodes without building anything and refuses the
// first global that is not allowed, so that the unpickler only ever sees
// what it can build from data. Strings pushed and memoised are shadowed so
// that STACK_GLOBAL's operands (protocol 4) can be named too.
void check_globals(const std::string& pkl, const std::string& name) {
  const auto* p = reinterpret_cast<const uint8_t*>(pkl.data());
  const size_t n = pkl.size();
  size_t i = 0;
  auto need = [&](size_t k) {
    if (k > n - i) bad(name, "data.pkl ends inside an opcode");
  };
  auto fixed = [&](size_t k) -> uint64_t {
    need(k);
    uint64_t v = 0;
    for (size_t b = 0; b < k; ++b) v |= static_cast<uint64_t>(p[i + b]) << (8 * b);
    i += k;
    return v;
  };
  auto line = [&]() {
    auto end = static_cast<const uint8_t*>(std::memchr(p + i, '\n', n - i));
    if (!end) bad(name, "data.pkl ends inside an opcode");
    std::string s(reinterpret_cast<const char*>(p + i), end - (p + i));
    i = static_cast<size_t>(end - p) + 1;
    return s;
  };
  std::vector<std::string> shadow;  // recent pushes: a string, or "" for anything else
  std::vector<std::string> memo;
  auto push = [&](std::string s) {
    shadow.push_back(std::move(s));
    if (shadow.size() > 2) shadow.erase(shadow.begin());
  };
  auto remember = [&](uint64_t key) {
    if (key > n) bad(name, "data.pkl has a memo key past its size");
    if (memo.size() <= key) memo.resize(key + 1);
    memo[key] = shadow.empty() ? "" : shadow.back();
  };
  auto recall = [&](uint64_t key) { push(key < memo.size() ? memo[key] : ""); };
  auto global = [&](const std::string& module, const std::string& cls) {
    if (!allowed_global(module, cls))
      bad(name, "it holds a pickled " + module + "." + cls +
                    ": only tensors, containers, numbers and strings are loaded, and nothing in the file is run");
  };
  while (i < n) {
    uint8_t op = p[i++];
    switch (op) {
      case '.': return;  // STOP
      case 'c': {        // GLOBAL "module\nname\n"
        std::string module = line();
        global(module, line());
        push("");
        break;
      }
      case 0x93:  // STACK_GLOBAL
        if (shadow.size() < 2 || shadow[0].empty() || shadow[1].empty())
          bad(name, "it holds a global whose name is not written out");
        global(shadow[0], shadow[1]);
        push("");
        break;
      case 'i':  // INST: builds an instance of any class
        bad(name, "it holds a pickled instance (INST), which libddp does not load");
      case 0x82: case 0x83: case 0x84:  // EXT1/2/4: the copyreg registry
        bad(name, "it holds an extension-registry global, which libddp does not load");
      case 'I': case 'L': case 'S': case 'F': case 'P': line(); push(""); break;
      case 'V': push(line()); break;
      case 'g': recall(std::stoull("0" + line())); break;
      case 'p': remember(std::stoull("0" + line())); break;
      case 'J': fixed(4); push(""); break;
      case 'K': fixed(1); push(""); break;
      case 'M': fixed(2); push(""); break;
      case 'G': fixed(8); push(""); break;
      case 'h': recall(fixed(1)); break;
      case 'j': recall(fixed(4)); break;
      case 'q': remember(fixed(1)); break;
      case 'r': remember(fixed(4)); break;
      case 0x94: remember(memo.size()); break;  // MEMOIZE
      case 0x80: fixed(1); break;               // PROTO
      case 0x95: fixed(8); break;               // FRAME
      case 'X': case 0x8c: case 0x8d: {         // BINUNICODE, SHORT_, 8
        uint64_t len = fixed(op == 'X' ? 4 : op == 0x8c ? 1 : 8);
        need(len);
        push(std::string(reinterpret_cast<const char*>(p + i), len));
        i += len;
        break;
      }
      case 'T': case 'U': case 'B': case 'C': case 0x8e: case 0x96: case 0x8a: case 0x8b: {
        size_t width = (op == 'U' || op == 'C' || op == 0x8a) ? 1 : (op == 0x8e || op == 0x96) ? 8 : 4;
        uint64_t len = fixed(width);
        need(len);
        i += len;
        push("");
        break;
      }
      case '(': case '0': case '1': case '2': case 'N': case 'R': case 'a': case 'b': case 'd': case '}':
      case 'e': case 'l': case ']': case 'o': case 's': case 't': case ')': case 'u': case 'Q': case 0x81:
      case 0x85: case 0x86: case 0x87: case 0x88: case 0x89: case 0x8f: case 0x90: case 0x91: case 0x92:
      case 0x97: case 0x98:
        push("");
        break;
      default:
        bad(name, "data.pkl has an unknown pickle opcode " + std::to_string(op));
    }
  }
  bad(name, "data.pkl has no STOP opcode");
}

}  // namespace

void write_torch_archive(const c10::IValue& root, const ByteSink& sink) {
  std::vector<char> pkl;
  // Without type tags (torch.jit._pickle.restore_type_tag), which Python's
  // weights-only loader would refuse: plain dicts and lists, as torch.save's.
  torch::jit::Pickler pickler([&](const char* data, size_t size) { pkl.insert(pkl.end(), data, data + size); },
                              /*tensor_table=*/nullptr, /*type_renamer=*/nullptr, /*memoized_class_types=*/nullptr,
                              /*get_tensor_id=*/nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(root);
  pickler.stop();
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    sink(data, size);
    return size;
  });
  // Each storage goes from the tensor's own memory (a device tensor through
  // one host copy at a time), then the pickle that names them.
  torch::jit::writeArchiveAndTensors("data", pkl.data(), pkl.size(), pickler.tensorData(), writer);
  writer.writeEndOfFile();
}

bool looks_like_torch_archive(const void* head, size_t size) {
  return size >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0;
}

c10::IValue read_torch_archive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in, const std::string& name) {
  const uint64_t file_size = in->size();
  try {
    caffe2::serialize::PyTorchStreamReader reader(in);
    // Every record is stored (not compressed) and lies inside the file, so
    // no size in the directory can make us allocate more than the file holds.
    for (const auto& record : reader.getAllRecords()) {
      size_t offset = reader.getRecordOffset(record);
      size_t size = reader.getRecordSize(record);
      if (offset > file_size || size > file_size - offset)
        bad(name, "record " + record + " runs past the end of the file (truncated, or compressed)");
    }
    if (!reader.hasRecord("data.pkl")) bad(name, "it is a zip file without data.pkl (not a torch.save file)");
    auto [data, size] = reader.getRecord("data.pkl");
    check_globals(std::string(static_cast<const char*>(data.get()), size), name);
    return torch::jit::readArchiveAndTensors("data", "", "", std::nullopt, std::nullopt, at::Device(at::kCPU), reader);
  } catch (const Error&) {
    throw;
  } catch (const c10::Error& e) {
    bad(name, std::string("not a readable torch.save file: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    bad(name, std::string("not a readable torch.save file: ") + e.what());
  }
}

void save_state_dict_file(const std::string& path, const std::vector<NamedTensor>& state) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  for (const auto& t : state) d.insert(t.name, t.tensor.detach());
  write_file_atomically(path, [&](const ByteSink& sink) { write_torch_archive(d, sink); });
}

std::vector<NamedTensor> load_state_dict_file(const std::string& path) {
  c10::IValue v = read_torch_archive(file_checkpoint_io()->open(path), path);
  if (!v.isGenericDict()) bad(path, "it holds a " + v.tagKind() + ", not a state dict");
  std::vector<NamedTensor> out;
  for (const auto& e : v.toGenericDict()) {
    if (!e.key().isString() || !e.value().isTensor()) bad(path, "it holds an entry that is not a named tensor");
    out.push_back({e.key().toStringRef(), e.value().toTensor()});
  }
  return out;
}

}  // namespace ddp::core
