#include "checkpoint/torch_archive.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <map>
#include <new>
#include <set>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/zip_directory.h"
#include "comm/failure.h"
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
  if (module == "torch") return storages.count(name) != 0;
  if (module == "torch.jit._pickle")
    return name == "build_intlist" || name == "build_doublelist" || name == "build_boollist" ||
           name == "build_tensorlist" || name == "build_genericlist";
  return false;
}

// Walks the pickle's opcodes (protocol 2, what torch.save writes and
// LibTorch reads) without building anything, and refuses the first global
// that is not allowed, so that the unpickler only ever sees what it can
// build from data.
//
// Returns the pickle to unpickle: the same opcodes, with three rewrites that
// LibTorch's unpickler needs for what Python writes. Each empty
// collections.OrderedDict() (Python's state_dict, a tensor's backward hooks)
// becomes an empty dict: LibTorch builds OrderedDict as None, expecting one
// only for the hooks, so a state_dict would fail on its first item. And a
// BUILD (which only an OrderedDict's attributes can reach, every class being
// refused: a state_dict's _metadata) becomes an entry "__dict__" of the
// dict, holding those attributes (LibTorch's BUILD expects an object). A
// collections.Counter(dict) (MultiStepLR's milestones) becomes its dict. To
// know where that state begins, the walk keeps, for each item on the
// pickle's stack, where its opcodes begin in the output.
std::string sanitize_pickle(const std::string& pkl, const std::string& name) {
  const auto* p = reinterpret_cast<const uint8_t*>(pkl.data());
  const size_t n = pkl.size();
  size_t i = 0;
  std::string out;
  out.reserve(n);
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
    std::string v(reinterpret_cast<const char*>(p + i), end - (p + i));
    i = static_cast<size_t>(end - p) + 1;
    return v;
  };
  // The stack: where each item's opcodes begin in `out`; marks flagged.
  struct Item {
    size_t start;
    bool mark;
  };
  std::vector<Item> stack;
  auto pop = [&](size_t k) {
    if (stack.size() < k) bad(name, "data.pkl pops more than it pushed");
    size_t start = stack.empty() || k == 0 ? out.size() : stack[stack.size() - k].start;
    for (size_t j = 0; j < k; ++j) {
      if (stack.back().mark) bad(name, "data.pkl uses a mark as a value");
      stack.pop_back();
    }
    return start;
  };
  auto pop_to_mark = [&]() {
    while (!stack.empty() && !stack.back().mark) stack.pop_back();
    if (stack.empty()) bad(name, "data.pkl has no mark where it needs one");
    size_t start = stack.back().start;
    stack.pop_back();
    return start;
  };
  std::set<uint64_t> od_memo;  // memo keys holding the OrderedDict class
  bool od = false;              // the OrderedDict class is on top of the stack, not emitted
  // collections.Counter(dict) (MultiStepLR's milestones) becomes the dict:
  // the class is not emitted, its one-tuple of arguments and the call
  // neither. Each pending call: the stack depth where the class would be,
  // and whether its arguments are complete.
  std::set<uint64_t> counter_memo;
  bool counter_class = false;  // the class was just pushed (a PUT may follow)
  std::vector<std::pair<size_t, bool>> counter_calls;
  while (i < n) {
    const size_t start = i, here = out.size();
    const uint8_t op = p[i++];
    bool emit = true;
    // The class OrderedDict may only be memoised, recalled, or called with no
    // arguments: EMPTY_TUPLE REDUCE, which becomes EMPTY_DICT.
    if (od && op != 'q' && op != 'r') {
      if (op != ')' || i >= n || p[i] != 'R')
        bad(name, "it holds an OrderedDict built from arguments, which libddp does not load");
      ++i;
      out.push_back('}');
      stack.push_back({here, false});
      od = false;
      continue;
    }
    const bool after_counter_class = counter_class;
    counter_class = false;
    auto counter = [&]() {
      counter_calls.push_back({stack.size(), false});
      counter_class = true;
      emit = false;
    };
    auto get = [&](uint64_t key) {
      if (counter_memo.count(key)) {
        counter();
      } else if (od_memo.count(key)) {
        od = true;
        emit = false;
      } else {
        stack.push_back({here, false});
      }
    };
    auto put = [&](uint64_t key) {
      if (after_counter_class) {
        counter_memo.insert(key);
        counter_class = true;
        emit = false;
      } else if (od) {
        od_memo.insert(key);
        emit = false;
      } else {
        if (stack.empty()) bad(name, "data.pkl memoises an empty stack");
      }
    };
    switch (op) {
      case '.':  // STOP
        out.push_back('.');
        return out;
      case 0x80: {  // PROTO
        uint64_t v = fixed(1);
        if (v != 2)
          bad(name, "pickle protocol " + std::to_string(v) + ": libddp reads protocol 2, torch.save's default");
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        std::string module = line();
        std::string cls = line();
        if (module == "collections" && cls == "OrderedDict") {
          od = true;
          emit = false;
          break;
        }
        if (module == "collections" && cls == "Counter") {
          counter();
          break;
        }
        if (!allowed_global(module, cls))
          bad(name, "it holds a pickled " + module + "." + cls +
                        ": only tensors, containers, numbers and strings are loaded, and nothing in the file is run");
        stack.push_back({here, false});
        break;
      }
      case 'h': get(fixed(1)); break;
      case 'j': get(fixed(4)); break;
      case 'q': put(fixed(1)); break;
      case 'r': put(fixed(4)); break;
      case '(': stack.push_back({here, true}); break;  // MARK
      case 'N': case 0x88: case 0x89: case ')': case ']': case '}': stack.push_back({here, false}); break;
      case 'J': fixed(4); stack.push_back({here, false}); break;
      case 'K': fixed(1); stack.push_back({here, false}); break;
      case 'M': fixed(2); stack.push_back({here, false}); break;
      case 'G': fixed(8); stack.push_back({here, false}); break;
      case 'X': case 0x8c: case 'T': case 'U': case 'B': case 'C': case 0x8a: case 0x8b: {
        size_t width = (op == 0x8c || op == 'U' || op == 'C' || op == 0x8a) ? 1 : 4;
        uint64_t len = fixed(width);
        need(len);
        i += len;
        stack.push_back({here, false});
        break;
      }
      case 't': case 'l': case 'd': stack.push_back({pop_to_mark(), false}); break;  // TUPLE, LIST, DICT
      case 0x85:  // TUPLE1; a Counter's arguments stay the dict they hold
        if (!counter_calls.empty() && !counter_calls.back().second && stack.size() == counter_calls.back().first + 1) {
          counter_calls.back().second = true;
          emit = false;
          break;
        }
        stack.push_back({pop(1), false});
        break;
      case 0x86: stack.push_back({pop(2), false}); break;                           // TUPLE2
      case 0x87: stack.push_back({pop(3), false}); break;                           // TUPLE3
      case 'a': pop(1); break;                                                      // APPEND
      case 's': pop(2); break;                                                      // SETITEM
      case 'e': case 'u': pop_to_mark(); break;                                     // APPENDS, SETITEMS
      case 'R': case 0x81:  // REDUCE, NEWOBJ; a Counter's call leaves its dict
        if (!counter_calls.empty() && stack.size() == counter_calls.back().first + 1) {
          if (!counter_calls.back().second || op != 'R')
            bad(name, "it holds a Counter built other than from a dict, which libddp does not load");
          counter_calls.pop_back();
          emit = false;
          break;
        }
        stack.push_back({pop(2), false});
        break;
      case 'Q': stack.push_back({pop(1), false}); break;                            // BINPERSID
      case 'b': {  // BUILD: the attributes become the dict's entry "__dict__"
        size_t from = pop(1);
        static const char key[] = "X\x08\x00\x00\x00__dict__";  // BINUNICODE "__dict__"
        out.insert(from, key, sizeof(key) - 1);
        out.push_back('s');  // SETITEM
        emit = false;
        break;
      }
      case 'i':
        bad(name, "it holds a pickled instance (INST), which libddp does not load");
      default:
        bad(name, "data.pkl has pickle opcode " + std::to_string(op) + ", which torch.save's protocol 2 does not write");
    }
    if (emit) out.append(pkl, start, i - start);
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

bool is_attributes_entry(const c10::IValue& key, const c10::IValue& value) {
  return key.isString() && key.toStringRef() == "__dict__" && value.isGenericDict();
}

bool looks_like_torch_archive(const void* head, size_t size) {
  return size >= 4 && std::memcmp(head, "PK\x03\x04", 4) == 0;
}

c10::IValue read_torch_archive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in, const std::string& name) {
  const uint64_t file_size = in->size();
  try {
    // The zip directory is read here first: a damaged one is refused before
    // LibTorch's reader sees it (its constructor leaks miniz's state when it
    // throws).
    const auto crcs = zip_record_crcs(*in, name);
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
    // Every record is checked against its CRC-32 in the zip directory: a
    // flipped bit is refused, not trained on. The tensor records are read
    // first, each checked on a thread of its own while the next is read
    // (the check then costs little more than the reading), and handed to the
    // unpickler from memory. `records` outlives `checks`, whose futures wait
    // for their threads before the memory they read goes.
    auto expected = [&](const std::string& record) {
      auto it = crcs.find(record);
      if (it == crcs.end()) bad(name, "record " + record + " is not in the zip directory");
      return it->second;
    };
    auto damaged = [&](const std::string& record) {
      bad(name, "record " + record + " does not match its CRC-32 (the file is damaged)");
    };
    std::map<std::string, at::DataPtr> records;
    {
      std::vector<std::pair<std::string, std::future<bool>>> checks;
      auto* mappable = dynamic_cast<MappableSource*>(in.get());
      std::shared_ptr<uint8_t> mapping = mappable ? mappable->map() : nullptr;
      for (const auto& record : reader.getAllRecords()) {
        if (record.compare(0, 5, "data/") != 0) continue;
        at::DataPtr data;
        size_t size = reader.getRecordSize(record);
        if (mapping) {
          // Stored records lie whole in the file (checked above).
          uint8_t* where = mapping.get() + reader.getRecordOffset(record);
          data = at::DataPtr(where, new std::shared_ptr<uint8_t>(mapping),
                             [](void* ctx) { delete static_cast<std::shared_ptr<uint8_t>*>(ctx); }, at::kCPU);
        } else {
          data = std::get<0>(reader.getRecord(record));
        }
        const void* p = data.get();
        checks.emplace_back(record, std::async(std::launch::async, [p, size = size, want = expected(record)] {
                              return crc32_of(0, p, size) == want;
                            }));
        records[record] = std::move(data);
      }
      for (auto& [record, ok] : checks)
        if (!ok.get()) damaged(record);
    }
    auto [data, size] = reader.getRecord("data.pkl");
    if (crc32_of(0, data.get(), size) != expected("data.pkl")) damaged("data.pkl");
    const std::string pkl = sanitize_pickle(std::string(static_cast<const char*>(data.get()), size), name);
    size_t at = 0;
    torch::jit::Unpickler unpickler(
        [&](char* buf, size_t n) {
          n = std::min(n, pkl.size() - at);
          std::memcpy(buf, pkl.data() + at, n);
          at += n;
          return n;
        },
        /*type_resolver=*/nullptr, /*obj_loader=*/nullptr,
        [&](const std::string& key) {
          auto it = records.find("data/" + key);
          if (it == records.end()) bad(name, "data.pkl names a storage " + key + " the file lacks");
          at::DataPtr out = std::move(it->second);
          records.erase(it);  // a storage named twice is then "lacking", not empty
          return out;
        },
        at::Device(at::kCPU));
    unpickler.set_version(reader.version());
    return unpickler.parse_ivalue();
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail(Status::NoMemory, "checkpoint " + name + ": out of memory while reading it");
  } catch (const c10::Error& e) {
    if (is_out_of_memory(e)) fail_from_aten(Status::NoMemory, "checkpoint " + name, e);
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
    if (is_attributes_entry(e.key(), e.value())) continue;
    if (!e.key().isString() || !e.value().isTensor()) bad(path, "it holds an entry that is not a named tensor");
    out.push_back({e.key().toStringRef(), e.value().toTensor()});
  }
  return out;
}

}  // namespace ddp::core
