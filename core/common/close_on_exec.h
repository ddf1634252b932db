// Descriptors that a library libddp calls opens without close-on-exec.
//
// Gloo opens its connections, its listener and its event loop's epoll and
// wake-up pipe as plain descriptors. Every program a rank then starts
// (system(), popen(), posix_spawn, Rust's Command; fork alone aside)
// inherits them, and one that outlives the rank holds the rank's end of
// each connection open: its peers see no end of stream when the rank dies
// and wait out their timeout instead of failing at once. So the
// descriptors a call opened are marked close-on-exec after it.
#pragma once

#include <sys/types.h>

#include <tuple>
#include <utility>
#include <vector>

namespace ddp::core {

class NewDescriptors {
 public:
  // Notes the descriptors open now.
  NewDescriptors();
  // Marks close-on-exec each socket, pipe and epoll or event descriptor
  // opened since, that lacks the mark. Best effort: without /proc it does
  // nothing. Another thread's descriptor of those kinds opened in between
  // is marked too; a program it was meant for gets it through dup2, which
  // clears the mark.
  void close_on_exec() const;

  // A descriptor and what it refers to: a number closed and opened again
  // in between is a new descriptor.
  struct Open {
    int fd;
    dev_t dev;
    ino_t ino;
    bool operator<(const Open& o) const { return std::tie(fd, dev, ino) < std::tie(o.fd, o.dev, o.ino); }
  };

 private:
  std::vector<Open> before_;  // sorted
  bool known_ = false;       // whether /proc/self/fd could be listed
};

// f(), with what it opened marked close-on-exec once it returns.
template <typename F>
auto close_on_exec_what(F&& f) {
  NewDescriptors since;
  auto result = std::forward<F>(f)();
  since.close_on_exec();
  return result;
}

}  // namespace ddp::core
