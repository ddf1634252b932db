#include "launch/waitable_children.h"

#include <sys/wait.h>

#include <mutex>

namespace ddp::core::launch {
namespace {
std::mutex g_mutex;
int g_holders = 0;
bool g_changed = false;
struct sigaction g_program_action {};
}  // namespace

WaitableChildren::WaitableChildren() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_holders++ > 0) return;
  struct sigaction now {};
  if (sigaction(SIGCHLD, nullptr, &now) != 0) return;
  if (now.sa_handler != SIG_IGN && !(now.sa_flags & SA_NOCLDWAIT)) return;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  if (sigaction(SIGCHLD, &dfl, nullptr) == 0) {
    g_program_action = now;
    g_changed = true;
  }
}

WaitableChildren::~WaitableChildren() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_holders > 0 || !g_changed) return;
  sigaction(SIGCHLD, &g_program_action, nullptr);
  g_changed = false;
  // Children of the program's own that ended meanwhile are zombies the
  // kernel would have reaped, and that a program ignoring SIGCHLD never
  // waits for. No launch's workers are among them: the last holder is gone,
  // and each holder waited for its own.
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace ddp::core::launch
