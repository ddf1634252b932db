#include "checkpoint/checkpoint_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ATen/ops/empty.h>

#include <array>
#include <atomic>
#include <vector>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/regular_file.h"
#include "common/temporary_name.h"
#include "tensor/tensors.h"

namespace ddp::core {
namespace {

// File layout (little-endian, as the hosts this runs on):
//   "DDPCKPT\0" u32 format | i64 step | i64 epoch | u32 count |
//   count x { u32 name_len, name, i32 dtype, u32 ndim, i64 dims[ndim], u64 nbytes, bytes } |
//   u64 user_len, user | u32 crc32 of everything before it
constexpr char kMagic[8] = {'D', 'D', 'P', 'C', 'K', 'P', 'T', '\0'};
constexpr uint32_t kFormat = 1;
constexpr uint32_t kMaxName = 4096;
constexpr uint32_t kMaxDims = 32;

uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t n) {
  static const auto table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::string why_errno() { return std::strerror(errno); }

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void bytes(const void* p, size_t n) {
    crc_ = crc32_update(crc_, static_cast<const uint8_t*>(p), n);
    raw(p, n);
  }
  template <typename T> void value(T v) { bytes(&v, sizeof(v)); }
  void finish() {
    uint32_t crc = crc_;
    raw(&crc, sizeof(crc));
  }

 private:
  void raw(const void* p, size_t n) {
    auto* c = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), c, c + n);
  }
  std::vector<uint8_t>& out_;
  uint32_t crc_ = 0;
};

// Reads from bytes of known size; every read and every length is checked
// against what is left, so no length in the content can make us allocate
// more than it holds.
class Reader {
 public:
  Reader(const uint8_t* p, uint64_t size, const std::string& name) : p_(p), left_(size), name_(name) {}
  [[noreturn]] void bad(const std::string& what) const {
    fail(Status::IO, "checkpoint " + name_ + ": " + what + " (truncated, damaged, or not a libddp checkpoint)");
  }
  void bytes(void* p, uint64_t n, const char* what) {
    if (n > left_) bad(std::string(what) + " runs past the end of the file");
    std::memcpy(p, p_, n);
    crc_ = crc32_update(crc_, p_, n);
    p_ += n;
    left_ -= n;
  }
  template <typename T> T value(const char* what) {
    T v;
    bytes(&v, sizeof(v), what);
    return v;
  }
  // A length that must fit in what is left (each unit at least `unit` bytes).
  uint64_t length(uint64_t n, uint64_t unit, const char* what) const {
    if (unit != 0 && n > left_ / unit) bad(std::string(what) + " " + std::to_string(n) + " is larger than the file");
    return n;
  }
  uint64_t left() const { return left_; }
  uint32_t crc() const { return crc_; }

 private:
  const uint8_t* p_;
  uint64_t left_;
  const std::string& name_;
  uint32_t crc_ = 0;
};

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::vector<uint8_t> encode_checkpoint(const Checkpoint& c) {
  std::vector<uint8_t> out;
  Writer w(out);
  w.bytes(kMagic, sizeof(kMagic));
  w.value<uint32_t>(kFormat);
  w.value<int64_t>(c.step);
  w.value<int64_t>(c.epoch);
  w.value<uint32_t>(static_cast<uint32_t>(c.tensors.size()));
  for (const auto& nt : c.tensors) {
    check_arg(nt.name.size() <= kMaxName, "save_checkpoint: tensor name longer than " + std::to_string(kMaxName));
    check_arg(nt.tensor.defined(), "save_checkpoint: tensor '" + nt.name + "' is undefined");
    check_arg(static_cast<uint32_t>(nt.tensor.dim()) <= kMaxDims, "save_checkpoint: tensor '" + nt.name + "' has too many dimensions");
    at::Tensor host = nt.tensor.detach().to(at::kCPU).contiguous();
    w.value<uint32_t>(static_cast<uint32_t>(nt.name.size()));
    w.bytes(nt.name.data(), nt.name.size());
    w.value<int32_t>(static_cast<int32_t>(from_scalar_type(host.scalar_type())));
    w.value<uint32_t>(static_cast<uint32_t>(host.dim()));
    for (int64_t d : host.sizes()) w.value<int64_t>(d);
    uint64_t nbytes = static_cast<uint64_t>(host.numel()) * host.element_size();
    w.value<uint64_t>(nbytes);
    if (nbytes) w.bytes(host.data_ptr(), nbytes);
  }
  w.value<uint64_t>(c.user.size());
  if (!c.user.empty()) w.bytes(c.user.data(), c.user.size());
  w.finish();
  return out;
}

void write_file_atomically(const std::string& named, const ContentWriter& write) {
  check_arg(!named.empty(), "save_checkpoint: the path is empty");
  // The rename below replaces whatever it is given: as root, a save to
  // /dev/null would put a file in the device's place.
  std::string what;
  const std::string path = file_to_replace(named, &what);
  if (path.empty())
    fail(Status::IO, "checkpoint " + named + ": not a regular file but " + what +
                         ", which a save (a temporary file renamed onto the path) would replace");
  // A file the saver may not write (made read-only to keep it) is not
  // replaced, though the rename needs only the directory: torch.save and
  // Lightning's atomic_save open it for writing and are refused there.
  // (Root may write it, as there.)
  if (::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0 && errno != ENOENT)
    fail(Status::IO, "checkpoint " + named + ": cannot write it: " + why_errno());
  // One temporary file per call, not per process: two threads saving to
  // one path at once wrote the same temporary file, and the one renamed
  // first was a mix of both. (No O_EXCL: a crashed run's file under the same
  // name, a container's restart having the same pid, is overwritten.)
  static std::atomic<uint64_t> calls{0};
  const std::string tmp =
      temporary_beside(path, ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1)));
  Fd f;
  // 0666 less the umask, as torch.save's plain open makes a new file.
  f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (f.fd < 0) fail(Status::IO, "checkpoint " + named + ": cannot create " + tmp + ": " + why_errno());
  try {
    // A file saved over keeps its mode and owners, as one rewritten in
    // place (torch.save) does: a checkpoint made private (0600) stays so.
    struct stat old {};
    if (::stat(path.c_str(), &old) == 0) {
      if (::fchmod(f.fd, old.st_mode & 07777) != 0)
        fail(Status::IO, "checkpoint " + named + ": cannot give " + tmp + " the file's mode: " + why_errno());
      if (old.st_uid != ::geteuid() || old.st_gid != ::getegid()) (void)::fchown(f.fd, old.st_uid, old.st_gid);
    }
    write([&](const void* data, size_t n) {
      const char* p = static_cast<const char*>(data);
      while (n > 0) {
        ssize_t w = ::write(f.fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail(Status::IO, "checkpoint " + named + ": write failed: " + why_errno());
        p += w;
        n -= static_cast<size_t>(w);
      }
    });
    if (::fsync(f.fd) != 0) fail(Status::IO, "checkpoint " + named + ": fsync failed: " + why_errno());
    int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) fail(Status::IO, "checkpoint " + named + ": close failed: " + why_errno());
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail(Status::IO, "checkpoint " + named + ": cannot rename " + tmp + " onto " + (path == named ? "it" : path) +
                           ": " + why_errno());
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  // The rename itself must survive a crash of the machine.
  Fd dir;
  dir.fd = ::open(directory_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir.fd >= 0) ::fsync(dir.fd);
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  write_file_atomically(path, [&](const std::function<void(const void*, size_t)>& sink) { sink(bytes.data(), bytes.size()); });
}

std::vector<uint8_t> read_whole_file(const std::string& path) {
  Fd f;
  std::string why;
  f.fd = open_regular_file(path, &why);
  if (f.fd < 0) fail(Status::IO, "checkpoint " + path + ": " + why);
  std::vector<uint8_t> bytes;
  if (!read_to_end(f.fd, &bytes, &why)) fail(Status::IO, "checkpoint " + path + ": " + why);
  return bytes;  // cut short where it shrank meanwhile: decoding names what is missing
}

void save_checkpoint_file(const std::string& path, const Checkpoint& c) {
  check_arg(!path.empty(), "save_checkpoint: the path is empty");
  write_file_atomically(path, encode_checkpoint(c));
}

Checkpoint load_checkpoint_file(const std::string& path) { return decode_checkpoint(read_whole_file(path), path); }

Checkpoint decode_checkpoint(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < sizeof(kMagic) + 2 * sizeof(uint32_t))
    fail(Status::IO, "checkpoint " + name + ": " + std::to_string(bytes.size()) + " bytes is too short for a checkpoint");
  // The CRC sits in the last four bytes; everything before it is content.
  Reader r(bytes.data(), bytes.size() - sizeof(uint32_t), name);
  char magic[sizeof(kMagic)];
  r.bytes(magic, sizeof(magic), "the magic");
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) r.bad("it does not start with libddp's checkpoint magic");
  uint32_t format = r.value<uint32_t>("the format");
  if (format != kFormat) r.bad("format " + std::to_string(format) + " is not one this libddp reads (" + std::to_string(kFormat) + ")");
  Checkpoint c;
  c.step = r.value<int64_t>("the step");
  c.epoch = r.value<int64_t>("the epoch");
  // Each tensor record takes at least 20 bytes.
  uint64_t count = r.length(r.value<uint32_t>("the tensor count"), 20, "tensor count");
  for (uint64_t k = 0; k < count; ++k) {
    NamedTensor nt;
    uint32_t name_len = r.value<uint32_t>("a tensor name's length");
    if (name_len > kMaxName) r.bad("tensor name length " + std::to_string(name_len) + " is over " + std::to_string(kMaxName));
    nt.name.resize(name_len);
    r.bytes(nt.name.data(), name_len, "a tensor name");
    int32_t dtype = r.value<int32_t>("a dtype");
    if (dtype < 0 || dtype > static_cast<int32_t>(DType::Bool)) r.bad("tensor '" + nt.name + "' has unknown dtype " + std::to_string(dtype));
    uint32_t ndim = r.value<uint32_t>("a dimension count");
    if (ndim > kMaxDims) r.bad("tensor '" + nt.name + "' has " + std::to_string(ndim) + " dimensions");
    std::vector<int64_t> dims(ndim);
    for (auto& d : dims) d = r.value<int64_t>("a dimension");
    uint64_t nbytes = r.value<uint64_t>("a tensor's byte size");
    r.length(nbytes, 1, ("tensor '" + nt.name + "' byte size").c_str());
    std::vector<int64_t> shape;
    try {
      shape = checked_shape(dims.data(), dims.size(), dtype_size(static_cast<DType>(dtype)));
    } catch (const Error& e) {
      r.bad("tensor '" + nt.name + "': " + e.what());
    }
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (static_cast<uint64_t>(numel) * dtype_size(static_cast<DType>(dtype)) != nbytes)
      r.bad("tensor '" + nt.name + "': its shape does not match its " + std::to_string(nbytes) + " bytes");
    nt.tensor = at::empty(shape, at::TensorOptions().dtype(to_scalar_type(static_cast<DType>(dtype))));
    if (nbytes) r.bytes(nt.tensor.data_ptr(), nbytes, "tensor data");
    c.tensors.push_back(std::move(nt));
  }
  uint64_t user_len = r.length(r.value<uint64_t>("the user data length"), 1, "user data length");
  c.user.resize(user_len);
  if (user_len) r.bytes(c.user.data(), user_len, "the user data");
  if (r.left() != 0) r.bad(std::to_string(r.left()) + " bytes follow the content");
  uint32_t got = 0;
  std::memcpy(&got, bytes.data() + bytes.size() - sizeof(got), sizeof(got));
  if (got != r.crc()) r.bad("the checksum does not match the content");
  return c;
}

}  // namespace ddp::core
