#include "common/close_on_exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ddp::core {
namespace {

// The process's open descriptors, sorted; false where /proc is not there.
bool open_descriptors(std::vector<NewDescriptors::Open>* out) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return false;
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd != own && fstat(fd, &st) == 0) out->push_back({fd, st.st_dev, st.st_ino});
  }
  closedir(d);
  std::sort(out->begin(), out->end());
  return true;
}

// What Gloo opens: its sockets, its loop's epoll and wake-up pipe (and an
// eventfd, should a version use one). Files are left alone.
bool is_connection_kind(int fd) {
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  char target[64] = {0};
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  for (const char* kind : {"socket:", "pipe:", "anon_inode:[eventpoll]", "anon_inode:[eventfd]"})
    if (std::strncmp(target, kind, std::strlen(kind)) == 0) return true;
  return false;
}

}  // namespace

NewDescriptors::NewDescriptors() { known_ = open_descriptors(&before_); }

void NewDescriptors::close_on_exec() const {
  if (!known_) return;
  std::vector<Open> now;
  if (!open_descriptors(&now)) return;
  for (const Open& o : now) {
    if (std::binary_search(before_.begin(), before_.end(), o)) continue;
    const int fd = o.fd;
    const int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || (flags & FD_CLOEXEC) || !is_connection_kind(fd)) continue;
    fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

}  // namespace ddp::core
