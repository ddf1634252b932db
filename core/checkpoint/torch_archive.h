// PyTorch's own file format: the zip container torch.save writes, with a
// pickle (data.pkl) of tensors, containers, numbers and strings, and one
// record per tensor storage. Written as a stream (each storage straight
// from the tensor's memory, never the whole file in memory) and read
// through LibTorch's reader and unpickler, which build values and never
// run code from the file. `torch.load(path, weights_only=True)` opens what
// write_torch_archive writes; read_torch_archive opens what torch.save
// writes.
#pragma once

#include <ATen/core/ivalue.h>
#include <caffe2/serialize/read_adapter_interface.h>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace ddp::core {

// A source whose content can be mapped into memory (a local file): the
// tensors read from it then point into the mapping instead of being copied,
// so a load holds no second copy of the file in memory. The mapping is
// private and writable (copy on write): the file never changes.
class MappableSource : public caffe2::serialize::ReadAdapterInterface {
 public:
  // The whole content, mapped as long as a returned pointer lives and kept
  // from changing meanwhile; null where it cannot be kept so (then read).
  virtual std::shared_ptr<uint8_t> map() const = 0;
};

// Where bytes go, in order; throws to abandon the write.
using ByteSink = std::function<void(const void* data, size_t size)>;

// Pickles `root` (dicts, lists, tuples, tensors, ints, doubles, bools,
// strings, None) and writes the archive to `sink`.
void write_torch_archive(const c10::IValue& root, const ByteSink& sink);

// What LibTorch's archive writer (PyTorchStreamWriter, under torch.save's
// format and TorchScript's export) writes through: its writer function must
// never throw nor fall short, because an archive left unfinished is
// finished by the writer's destructor through the same function, whose
// second failure is thrown from the destructor and ends the process
// (std::terminate: a full disk did). This hands the bytes to `sink` until
// it first throws, keeps that exception, takes every later byte as written
// (dropped), and rethrow_failure() throws the kept one once the writer is
// done.
class ArchiveSink {
 public:
  explicit ArchiveSink(const ByteSink& sink) : sink_(sink) {}
  ArchiveSink(const ArchiveSink&) = delete;
  ArchiveSink& operator=(const ArchiveSink&) = delete;
  // For the writer, which copies the function it is given: this one
  // refers back to this object.
  std::function<size_t(const void*, size_t)> writer();
  void rethrow_failure() const;

 private:
  const ByteSink& sink_;
  std::exception_ptr failed_;
};

// Whether a dict entry read by read_torch_archive is the attributes of a
// Python OrderedDict (a state_dict's _metadata), which it keeps under
// "__dict__": not an entry of the dict itself.
bool is_attributes_entry(const c10::IValue& key, const c10::IValue& value);

// Calls `visit` with every tensor reached from `root` through lists,
// tuples and dicts (keys too). A value reached more than once (the pickle
// recalled it) is visited once, so a value shared many times costs no more
// than one; no recursion, whatever the nesting.
void for_each_tensor(const c10::IValue& root, const std::function<void(const at::Tensor&)>& visit);

// Whether `head` (the first bytes of a file) starts a zip container.
bool looks_like_torch_archive(const void* head, size_t size);

// The value in the archive `in`. Throws Status::IO naming `name` and what
// was wrong: not a zip container, a record that runs past the end of the
// file or is compressed, a damaged record (its CRC-32), a global other than
// the tensor rebuilders and containers torch.save uses (named), a tensor
// that does not fit its storage. Tensors are loaded onto the CPU; from a
// MappableSource they live in its mapping where it gives one (copy what
// is kept: while they live, writers of the file wait for them).
c10::IValue read_torch_archive(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in, const std::string& name);

// A state dict (name -> tensor, in order) as the file torch.save(
// model.state_dict(), path) writes, written atomically; and back, from any
// torch.save file of a dict of tensors (Status::IO naming what is not).
struct NamedTensor;
void save_state_dict_file(const std::string& path, const std::vector<NamedTensor>& state);
std::vector<NamedTensor> load_state_dict_file(const std::string& path);

}  // namespace ddp::core
