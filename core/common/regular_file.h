// Opening a file a caller names, for reading, only where it is a regular
// file. A plain open(2) of a FIFO for reading blocks until some process
// opens it for writing, which may be never: a checkpoint or module path
// that names one hung its load for good. Opened without blocking, the file
// is looked at (fstat) before anything is read; a regular file is then
// read as usual (O_NONBLOCK means nothing to one, and is cleared anyway).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace ddp::core
