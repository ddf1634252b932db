#include "common/asymmetric_fence.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ddp::core {
namespace {

long membarrier(int command) { return syscall(__NR_membarrier, command, 0, 0); }

// The scope's fence command (also its bit in MEMBARRIER_CMD_QUERY's answer).
int fence_command(FenceScope scope) {
  return scope == FenceScope::Process ? MEMBARRIER_CMD_PRIVATE_EXPEDITED : MEMBARRIER_CMD_GLOBAL_EXPEDITED;
}

bool register_for(FenceScope scope) {
  const int reg = scope == FenceScope::Process ? MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED
                                               : MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  const long supported = membarrier(MEMBARRIER_CMD_QUERY);
  return supported > 0 && (supported & fence_command(scope)) != 0 && membarrier(reg) == 0;
}

}  // namespace

bool asymmetric_fences(FenceScope scope) {
  // Function statics: registered once, before the first light fence of
  // the scope relies on it.
  if (scope == FenceScope::Process) {
    static const bool process = register_for(FenceScope::Process);
    return process;
  }
  static const bool host = register_for(FenceScope::Host);
  return host;
}

void heavy_fence(FenceScope scope) {
  // A process that did not register for the private command may not use it
  // (EPERM); the global one needs no registration from its caller.
  if ((scope == FenceScope::Host || asymmetric_fences(scope)) && membarrier(fence_command(scope)) == 0) return;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ddp::core
