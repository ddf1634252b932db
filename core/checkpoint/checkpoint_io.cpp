#include "checkpoint/checkpoint_io.h"

#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "checkpoint/checkpoint_file.h"
#include "common/error.h"
#include "common/regular_file.h"

namespace ddp::core {
namespace {

std::string why_errno() { return std::strerror(errno); }

class BytesReader : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReader(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::vector<uint8_t> bytes_;
};

// A regular file read where asked (pread), never whole, or mapped.
class FileReader : public MappableSource {
 public:
  explicit FileReader(const std::string& path) {
    std::string why;
    fd_ = open_regular_file(path, &why);
    if (fd_ < 0) fail(Status::IO, "checkpoint " + path + ": " + why);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) {
      ::close(fd_);
      fail(Status::IO, "checkpoint " + path + ": cannot stat: " + why_errno());
    }
    size_ = static_cast<size_t>(st.st_size);
  }
  ~FileReader() override { ::close(fd_); }
  // Mapped only while no one can write the file: a read lease (fcntl
  // F_SETLEASE) makes whoever opens it for writing or truncates it wait
  // until the mapping goes (the kernel's lease-break-time at most, 45 s by
  // default), where without it a truncation made the next read of a page
  // past the new end a SIGBUS and an overwrite in place changed values
  // already checked against their CRC. Where the lease is refused (the
  // file is open for writing, owned by another user, leases are off or
  // the file system has none) nothing is mapped and the reader copies.
  std::shared_ptr<uint8_t> map() const override {
    if (size_ == 0) fail(Status::IO, "checkpoint: an empty file cannot be mapped");
    if (!hold_against_writers()) return nullptr;
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      const std::string why = why_errno();
      ::fcntl(fd_, F_SETLEASE, F_UNLCK);
      fail(Status::IO, "checkpoint: cannot map the file: " + why);
    }
    // The mapping may outlive this reader: it keeps a duplicate of the
    // descriptor to give the lease up by when it goes. Given up, not left
    // to the close: a child forked meanwhile holds the open file too, and
    // the lease would last as long as that child keeps it.
    int kept = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (kept < 0) {
      ::munmap(p, size_);
      ::fcntl(fd_, F_SETLEASE, F_UNLCK);
      return nullptr;
    }
    size_t n = size_;
    return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [n, kept](uint8_t* q) {
      ::munmap(q, n);
      ::fcntl(kept, F_SETLEASE, F_UNLCK);
      ::close(kept);
    });
  }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    size_t got = 0;
    while (got < n) {
      ssize_t r = ::pread(fd_, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(pos + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;  // an error or the end: the reader names what is missing
      got += static_cast<size_t>(r);
    }
    return got;
  }

 private:
  bool hold_against_writers() const;

  int fd_ = -1;
  size_t size_ = 0;
};

bool FileReader::hold_against_writers() const {
  // A lease's break is announced by a signal to the descriptor's owner
  // (SIGIO by default, which ends a process that does not handle it): the
  // signal is one ignored by default (SIGURG), and once the lease is taken
  // the owner it set is cleared, so no signal is sent at all.
  if (::fcntl(fd_, F_SETSIG, SIGURG) != 0) return false;
  if (::fcntl(fd_, F_SETLEASE, F_RDLCK) != 0) return false;
  // Truncated between the open and the lease: what is read, not mapped,
  // then ends short and is refused as such.
  struct stat st {};
  if (::fcntl(fd_, F_SETOWN, 0) != 0 || ::fstat(fd_, &st) != 0 || static_cast<size_t>(st.st_size) != size_) {
    ::fcntl(fd_, F_SETLEASE, F_UNLCK);
    return false;
  }
  return true;
}

class FileCheckpointIO : public CheckpointIO {
 public:
  void save(const std::vector<uint8_t>& bytes, const std::string& path) override { write_file_atomically(path, bytes); }
  std::vector<uint8_t> load(const std::string& path) override { return read_whole_file(path); }
  void remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fail(Status::IO, "checkpoint " + path + ": cannot remove: " + why_errno());
  }
  void save_streamed(const ContentWriter& write, const std::string& path) override { write_file_atomically(path, write); }
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> open(const std::string& path) override {
    return std::make_shared<FileReader>(path);
  }
};

}  // namespace

void CheckpointIO::save_streamed(const ContentWriter& write, const std::string& path) {
  std::vector<uint8_t> bytes;
  write([&](const void* data, size_t n) {
    auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  });
  save(bytes, path);
}

std::shared_ptr<caffe2::serialize::ReadAdapterInterface> CheckpointIO::open(const std::string& path) {
  return std::make_shared<BytesReader>(load(path));
}

std::shared_ptr<CheckpointIO> file_checkpoint_io() { return std::make_shared<FileCheckpointIO>(); }

std::shared_ptr<caffe2::serialize::ReadAdapterInterface> bytes_source(std::vector<uint8_t> bytes) {
  return std::make_shared<BytesReader>(std::move(bytes));
}

}  // namespace ddp::core
