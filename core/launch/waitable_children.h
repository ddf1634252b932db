// Keeping this process's children for waitpid while a launcher waits.
//
// Where SIGCHLD is ignored (SIG_IGN, or SA_NOCLDWAIT; inherited through exec
// from a parent that set it, or set by a program to have its children
// reaped for it), the kernel reaps each child as it ends and waitpid never
// reports it: a launcher polling for its workers' ends waited for good, and
// SIGTERM could not end it either (it forwarded the signal and waited on).
// While one of these lives, SIGCHLD has its default action; the last to go
// puts the program's disposition back, and reaps what the kernel would have
// reaped meanwhile: the program's own children that ended (it ignores
// SIGCHLD, so it never waits for them).
#pragma once

#include <signal.h>

namespace ddp::core::launch {

class WaitableChildren {
 public:
  WaitableChildren();
  ~WaitableChildren();
  WaitableChildren(const WaitableChildren&) = delete;
  WaitableChildren& operator=(const WaitableChildren&) = delete;
};

}  // namespace ddp::core::launch
