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
#include "checkpoint/pickle_filter.h"
#include "checkpoint/zip_directory.h"
#include "comm/failure.h"
#include "checkpoint/checkpoint_error.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// LibTorch's unpickler builds each tensor as the pickle says: a storage of
// the element count the pickle gives, over its record's memory, and a view
// of the size, stride and offset the pickle gives, checked against
// neither (Python's torch.load checks the view, through Tensor.set_). A
// hostile file could so make a tensor that reads memory past its record.
// Every tensor reached from `root` must lie in its record (`record_bytes`:
// each record's memory and size).
void check_tensors_lie_in_their_records(const c10::IValue& root, const std::map<const void*, size_t>& record_bytes,
                                        const std::string& name) {
  for_each_tensor(root, [&](const at::Tensor& t) {
    const at::Storage& storage = t.storage();
    // An empty storage (an empty record's memory may be no address at
    // all) holds nothing a view could reach; the extent below says so.
    auto record = record_bytes.find(storage.data());
    if (storage.nbytes() > 0 && (record == record_bytes.end() || storage.nbytes() > record->second))
      bad_checkpoint(name, "data.pkl sizes a tensor storage at " + std::to_string(storage.nbytes()) +
                    " bytes, more than its record holds");
    // The elements the view reaches, in units of its dtype: offset plus
    // (size - 1) * stride per dimension, every stride non-negative.
    int64_t last = t.storage_offset();
    bool overflow = last < 0;
    for (int64_t d = 0; d < t.dim() && !overflow; ++d) {
      if (t.size(d) == 0) {
        last = -1;  // no element: nothing to reach
        break;
      }
      int64_t reach = 0;
      overflow = t.stride(d) < 0 || __builtin_mul_overflow(t.size(d) - 1, t.stride(d), &reach) ||
                 __builtin_add_overflow(last, reach, &last);
    }
    int64_t end_bytes = 0;
    if (overflow || (last >= 0 && (__builtin_mul_overflow(last + 1, static_cast<int64_t>(t.element_size()), &end_bytes) ||
                                   static_cast<uint64_t>(end_bytes) > storage.nbytes())))
      bad_checkpoint(name, "data.pkl makes a tensor of size " + c10::str(t.sizes()) + ", stride " + c10::str(t.strides()) +
                    " and offset " + std::to_string(t.storage_offset()) + " that reaches past its storage of " +
                    std::to_string(storage.nbytes()) + " bytes");
  });
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
  ArchiveSink out(sink);
  {
    caffe2::serialize::PyTorchStreamWriter writer(out.writer());
    // Each storage goes from the tensor's own memory (a device tensor
    // through one host copy at a time), then the pickle that names them.
    torch::jit::writeArchiveAndTensors("data", pkl.data(), pkl.size(), pickler.tensorData(), writer);
    writer.writeEndOfFile();
  }
  out.rethrow_failure();
}

std::function<size_t(const void*, size_t)> ArchiveSink::writer() {
  return [this](const void* data, size_t size) {
    if (!failed_) {
      try {
        sink_(data, size);
      } catch (...) {
        failed_ = std::current_exception();
      }
    }
    return size;
  };
}

void ArchiveSink::rethrow_failure() const {
  if (failed_) std::rethrow_exception(failed_);
}

void for_each_tensor(const c10::IValue& root, const std::function<void(const at::Tensor&)>& visit) {
  std::vector<c10::IValue> todo{root};
  std::set<const void*> seen;
  while (!todo.empty()) {
    const c10::IValue v = std::move(todo.back());
    todo.pop_back();
    if (v.isPtrType() && !seen.insert(v.internalToPointer()).second) continue;
    if (v.isTensor()) {
      visit(v.toTensor());
    } else if (v.isList()) {
      for (const auto& x : v.toListRef()) todo.push_back(x);
    } else if (v.isTuple()) {
      for (const auto& x : v.toTupleRef().elements()) todo.push_back(x);
    } else if (v.isGenericDict()) {
      for (const auto& e : v.toGenericDict()) {
        todo.push_back(e.key());
        todo.push_back(e.value());
      }
    }
  }
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
        bad_checkpoint(name, "record " + record + " runs past the end of the file (truncated, or compressed)");
    }
    if (!reader.hasRecord("data.pkl")) bad_checkpoint(name, "it is a zip file without data.pkl (not a torch.save file)");
    // Every record is checked against its CRC-32 in the zip directory: a
    // flipped bit is refused, not trained on. The tensor records are read
    // first, each checked on a thread of its own while the next is read
    // (the check then costs little more than the reading), and handed to the
    // unpickler from memory. `records` outlives `checks`, whose futures wait
    // for their threads before the memory they read goes.
    auto expected = [&](const std::string& record) {
      auto it = crcs.find(record);
      if (it == crcs.end()) bad_checkpoint(name, "record " + record + " is not in the zip directory");
      return it->second;
    };
    auto damaged = [&](const std::string& record) {
      bad_checkpoint(name, "record " + record + " does not match its CRC-32 (the file is damaged)");
    };
    // Each tensor record's memory, shared by every storage the pickle
    // names by it, and its size.
    struct Record {
      std::shared_ptr<at::DataPtr> data;
      size_t size;
    };
    std::map<std::string, Record> records;
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
        records[record] = {std::make_shared<at::DataPtr>(std::move(data)), size};
      }
      for (auto& [record, ok] : checks)
        if (!ok.get()) damaged(record);
    }
    auto [data, size] = reader.getRecord("data.pkl");
    if (crc32_of(0, data.get(), size) != expected("data.pkl")) damaged("data.pkl");
    const std::string pkl = filter_pickle(std::string(static_cast<const char*>(data.get()), size), name);
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
          if (it == records.end()) bad_checkpoint(name, "data.pkl names a storage " + key + " the file lacks");
          // A storage named again (a view of another tensor, tied weights)
          // is the same memory, as torch.load shares one storage; each
          // tensor keeps the record alive.
          const std::shared_ptr<at::DataPtr>& memory = it->second.data;
          return at::DataPtr(memory->get(), new std::shared_ptr<at::DataPtr>(memory),
                             [](void* ctx) { delete static_cast<std::shared_ptr<at::DataPtr>*>(ctx); }, at::kCPU);
        },
        at::Device(at::kCPU));
    unpickler.set_version(reader.version());
    c10::IValue root = unpickler.parse_ivalue();
    std::map<const void*, size_t> record_bytes;
    for (const auto& [record, r] : records) record_bytes[r.data->get()] = r.size;
    check_tensors_lie_in_their_records(root, record_bytes, name);
    return root;
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail(Status::NoMemory, "checkpoint " + name + ": out of memory while reading it");
  } catch (const c10::Error& e) {
    if (is_out_of_memory(e)) fail_from_aten(Status::NoMemory, "checkpoint " + name, e);
    bad_checkpoint(name, std::string("not a readable torch.save file: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    bad_checkpoint(name, std::string("not a readable torch.save file: ") + e.what());
  }
}

void save_state_dict_file(const std::string& path, const std::vector<NamedTensor>& state) {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  for (const auto& t : state) d.insert(t.name, t.tensor.detach());
  write_file_atomically(path, [&](const ByteSink& sink) { write_torch_archive(d, sink); });
}

std::vector<NamedTensor> load_state_dict_file(const std::string& path) {
  c10::IValue v = read_torch_archive(file_checkpoint_io()->open(path), path);
  if (!v.isGenericDict()) bad_checkpoint(path, "it holds a " + v.tagKind() + ", not a state dict");
  std::vector<NamedTensor> out;
  for (const auto& e : v.toGenericDict()) {
    if (is_attributes_entry(e.key(), e.value())) continue;
    if (!e.key().isString() || !e.value().isTensor()) bad_checkpoint(path, "it holds an entry that is not a named tensor");
    out.push_back({e.key().toStringRef(), e.value().toTensor()});
  }
  return out;
}

}  // namespace ddp::core
