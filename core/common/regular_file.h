// Opening a file a caller names, for reading, only where it is a regular
// file. A plain open(2) of a FIFO for reading blocks until some process
// opens it for writing, which may be never: a checkpoint or module path
// that names one hung its load for good. Opened without blocking, the file
// is looked at (fstat) before anything is read; a regular file is then
// read as usual (O_NONBLOCK means nothing to one, and is cleared anyway).
// For writing, what a path names that a file written whole must not
// replace.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ddp::core {

// The open descriptor (O_CLOEXEC), or -1 with *why saying what is wrong:
// it cannot be opened (errno's words), or it is not a regular file (a
// directory, FIFO, socket or device).
inline int open_regular_file(const std::string& path, std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    *why = std::string("cannot open: ") + std::strerror(errno);
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    *why = "not a regular file";
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Where a file written whole (a temporary file renamed onto the path) goes
// for `path`: the path itself where nothing or a regular file is there;
// through a symbolic link to a regular file, that file (as torch.save and
// every plain open write through a link; a dangling link is replaced).
// Empty where the path names, or a link leads to, something a rename must
// not replace, with *what saying what it is: "a directory", "a FIFO", "a
// character device" (/dev/null; /dev/stdout leads to one or to a pipe),
// "a block device", "a socket". As root, a rename onto /dev/null puts a
// file in the device's place.
inline std::string file_to_replace(const std::string& path, std::string* what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return path;
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    if (::stat(path.c_str(), &st) != 0) return path;
    char* real = ::realpath(path.c_str(), nullptr);
    const bool resolved = real != nullptr;
    if (resolved) target = real;
    std::free(real);
    if (S_ISREG(st.st_mode) && resolved) return target;
  }
  switch (st.st_mode & S_IFMT) {
    case S_IFDIR: *what = "a directory"; break;
    case S_IFIFO: *what = "a FIFO"; break;
    case S_IFCHR: *what = "a character device"; break;
    case S_IFBLK: *what = "a block device"; break;
    case S_IFSOCK: *what = "a socket"; break;
    default: *what = "not a regular file"; break;
  }
  if (target != path) *what += " (" + target + ")";
  return "";
}

// Reads `fd` from where it stands to its end into *bytes (a contiguous byte
// container: std::string, std::vector<uint8_t>), sized once from fstat, so
// that a large file is read straight into place, and grown or cut to what
// was read (a file that changes size meanwhile); false with *why on a read
// error.
template <typename Bytes>
bool read_to_end(int fd, Bytes* bytes, std::string* why) {
  struct stat st {};
  const size_t expected = ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<size_t>(st.st_size) : 0;
  bytes->resize(expected + 1);  // the extra byte finds the end without a second, empty read of a file that kept its size
  size_t got = 0;
  for (;;) {
    if (got == bytes->size()) bytes->resize(got + std::max<size_t>(got / 2, 65536));
    const ssize_t r = ::read(fd, &(*bytes)[got], bytes->size() - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      *why = std::string("read failed: ") + std::strerror(errno);
      return false;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  bytes->resize(got);
  return true;
}

// The whole of the regular file at `path`, read through the descriptor that
// was checked (a second open by path would let the file be swapped for a
// FIFO in between); false with *why as above, or the read's errno words.
inline bool read_regular_file(const std::string& path, std::string* bytes, std::string* why) {
  const int fd = open_regular_file(path, why);
  if (fd < 0) return false;
  const bool read = read_to_end(fd, bytes, why);
  ::close(fd);
  return read;
}

}  // namespace ddp::core
