// Descriptors that a library libddp calls opens, kept from the rank's child
// processes.
//
// Gloo opens its connections, its listener and its event loop's epoll and
// wake-up pipe as plain descriptors. Every process a rank then starts
// inherits them: one started with exec (system(), popen(), posix_spawn,
// Rust's Command) keeps those not marked close-on-exec, one made by fork
// alone (a worker or helper that never execs) keeps them all. A child that
// outlives the rank holds the rank's end of each connection open: its peers
// see no end of stream when the rank dies and wait out their timeout
// instead of failing at once. So the descriptors a call opened are marked
// close-on-exec after it, and a child made by fork drops its copies of the
// sockets among them at once (a pthread_atfork handler; the rank's own stay
// open).
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
  // opened since, that lacks the mark, and has every child that fork makes
  // from now on drop its copy of each socket among them. Best effort:
  // without /proc it does nothing. Another thread's descriptor of those
  // kinds opened in between is treated the same; a program it was meant
  // for gets it through dup2, which clears the mark.
  void keep_from_children() const;

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

// Has every child that fork makes from now on drop its copy of socket `fd`
// (opened close-on-exec by its owner), as above: for libddp's own sockets
// (the store's listener and connections), which a child would otherwise
// hold open, keeping a port taken or a dead rank's end of a connection up.
void drop_in_forked_children(int fd);

// f(), with what it opened kept from child processes once it returns.
template <typename F>
auto kept_from_children(F&& f) {
  NewDescriptors since;
  auto result = std::forward<F>(f)();
  since.keep_from_children();
  return result;
}

}  // namespace ddp::core
