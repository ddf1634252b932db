// Standard input, output and error, kept open.
//
// A process started with one of them closed (a daemon that closed its
// descriptors, `prog 1>&-`) gives the next descriptor it opens that
// number: libddp's store connection or a Gloo socket became descriptor 1
// or 2, and every line the program, LibTorch or libddp then printed went
// into the protocol of a peer. Each closed one is opened onto /dev/null
// before libddp opens anything, so that what is printed is lost, as it was
// meant to be, and no connection ever has those numbers.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace ddp::core {

inline void keep_standard_streams_open() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number: `fd` itself, the ones below it being open.
    const int opened = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) ::close(opened);  // another thread took the number first
  }
}

}  // namespace ddp::core
