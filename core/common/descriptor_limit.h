// A process's file descriptors: whether it has run out of them, and the
// raising of its limit for a process that hosts a store.
//
// Whether this process has run out of file descriptors: a socket, pipe or
// memfd it cannot open then fails with EMFILE (its own limit,
// RLIMIT_NOFILE) or ENFILE (the system's table), which neither waiting nor
// retrying mends while the process holds what it holds. Callers name it in
// their error instead of retrying until their timeout or passing on a
// library's message that does not say so (Gloo's "Cannot resolve
// 127.0.0.1 to a (local) address").
#pragma once

#include <dirent.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>

namespace ddp::core {

// What an open that failed with `err` ran out of, as a sentence to append
// to an error; empty where `err` is not a shortage of descriptors.
inline std::string fd_shortage_text(int err) {
  if (err == EMFILE) {
    rlimit r{};
    const std::string limit =
        getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY ? " of " + std::to_string(r.rlim_cur) : "";
    return "this process is at its limit" + limit + " open file descriptors (RLIMIT_NOFILE: raise ulimit -n)";
  }
  if (err == ENFILE) return "the system's table of open files is full (fs.file-max)";
  return "";
}

// The same, found out now by opening one descriptor (for errors from
// libraries that do not say why a socket could not be made); empty where
// one can be opened.
inline std::string fd_shortage_now() {
  const int fd = eventfd(0, EFD_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  return fd_shortage_text(errno);
}

// Whether `count` more descriptors can be opened now: the numbers below
// the soft limit that no descriptor holds (read from /proc/self/fd, which
// opens none for long); else a sentence that says how few are free. Empty
// too where that cannot be read for another reason than a shortage.
inline std::string fd_shortage_for(size_t count) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  DIR* d = opendir("/proc/self/fd");
  if (!d) return errno == EMFILE || errno == ENFILE ? fd_shortage_text(errno) : "";
  const int listing = dirfd(d);
  rlim_t held = 0;  // below the limit: a descriptor inherited above it takes no room
  while (const dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const long fd = std::strtol(e->d_name, nullptr, 10);
    if (fd != listing && fd >= 0 && static_cast<rlim_t>(fd) < r.rlim_cur) ++held;
  }
  closedir(d);
  const rlim_t free = r.rlim_cur - std::min(held, r.rlim_cur);
  if (free >= count) return "";
  return "only " + std::to_string(free) + " of this process's limit of " + std::to_string(r.rlim_cur) +
         " file descriptors are free (RLIMIT_NOFILE: raise ulimit -n)";
}

// Raises this process's soft limit on descriptors (RLIMIT_NOFILE) to
// `wanted`: at most its hard limit (and the kernel's fs.nr_open where that
// is unlimited), never down. For a process that hosts a store, whose
// connections grow with the job while the usual soft limit is 1024; the
// hard limit is the administrator's bound, the soft one only a default
// (Go's runtime raises it for every program). Returns the soft limit it
// had where it raised it, else 0.
inline rlim_t raise_descriptor_limit(rlim_t wanted) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max || r.rlim_cur >= wanted) return 0;
  const rlim_t was = r.rlim_cur;
  r.rlim_cur = std::min(wanted, r.rlim_max);
  if (r.rlim_cur == RLIM_INFINITY) {  // above fs.nr_open is refused
    std::ifstream nr_open("/proc/sys/fs/nr_open");
    unsigned long most = 0;
    r.rlim_cur = nr_open >> most && most > was ? most : was;
  }
  return r.rlim_cur > was && setrlimit(RLIMIT_NOFILE, &r) == 0 ? was : 0;
}

}  // namespace ddp::core
