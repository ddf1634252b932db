#include "common/kept_from_children.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
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

// The sockets a child made by fork drops, each with what it referred to,
// so that a number closed since and reused for something else is left
// alone. The lock is held across every fork (taken in the prepare handler):
// the child finds the list whole, and no thread of the parent is changing
// it, since the child has none but the forking one.
struct ChildDrops {
  std::mutex mu;
  std::vector<NewDescriptors::Open> sockets;
  size_t prune_at = 64;  // the size at which those closed since are looked for again
};
ChildDrops& child_drops() {
  static ChildDrops* drops = new ChildDrops;  // never destroyed: a fork may come while the process exits
  return *drops;
}

// In the child, where only async-signal-safe calls may be made (fstat,
// open, dup2, fcntl, close): each socket's number is pointed at /dev/null
// rather than closed, so that nothing the child opens later gets a number
// that a copy of the parent's objects there still thinks its own.
void drop_sockets_in_child() {
  ChildDrops& d = child_drops();
  int null_fd = -1;
  for (const NewDescriptors::Open& o : d.sockets) {
    struct stat st {};
    if (fstat(o.fd, &st) != 0 || st.st_dev != o.dev || st.st_ino != o.ino) continue;
    if (null_fd < 0) null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || dup2(null_fd, o.fd) < 0) {
      close(o.fd);
      continue;
    }
    fcntl(o.fd, F_SETFD, FD_CLOEXEC);
  }
  if (null_fd >= 0) close(null_fd);
  d.mu.unlock();
}

bool still_open(const NewDescriptors::Open& o) {
  struct stat st {};
  return fstat(o.fd, &st) == 0 && st.st_dev == o.dev && st.st_ino == o.ino;
}

void drop_all_in_forked_children(const std::vector<NewDescriptors::Open>& sockets) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork([] { child_drops().mu.lock(); }, [] { child_drops().mu.unlock(); }, drop_sockets_in_child);
  });
  ChildDrops& d = child_drops();
  std::lock_guard<std::mutex> lock(d.mu);
  // Those closed since (a group freed, a store connection ended) go once
  // the list has doubled: it stays about as long as what is open, at a
  // look at each entry per entry added.
  if (d.sockets.size() >= d.prune_at) {
    d.sockets.erase(std::remove_if(d.sockets.begin(), d.sockets.end(), [](const auto& o) { return !still_open(o); }),
                    d.sockets.end());
    d.prune_at = std::max<size_t>(64, 2 * d.sockets.size());
  }
  d.sockets.insert(d.sockets.end(), sockets.begin(), sockets.end());
}

}  // namespace

NewDescriptors::NewDescriptors() { known_ = open_descriptors(&before_); }

void NewDescriptors::keep_from_children() const {
  if (!known_) return;
  std::vector<Open> now, sockets;
  if (!open_descriptors(&now)) return;
  for (const Open& o : now) {
    if (std::binary_search(before_.begin(), before_.end(), o)) continue;
    const int fd = o.fd;
    struct stat st {};
    if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) sockets.push_back(o);
    const int flags = fcntl(fd, F_GETFD);
    if (flags < 0 || (flags & FD_CLOEXEC) || !is_connection_kind(fd)) continue;
    fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  if (!sockets.empty()) drop_all_in_forked_children(sockets);
}

void drop_in_forked_children(int fd) {
  struct stat st {};
  if (fstat(fd, &st) == 0) drop_all_in_forked_children({NewDescriptors::Open{fd, st.st_dev, st.st_ino}});
}

}  // namespace ddp::core
