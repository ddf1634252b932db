// ddprun: a torchrun-compatible launcher and supervisor (the agent).
#pragma once

namespace ddp::launch {

// The whole program: parses torchrun's flags, rendezvouses the nodes,
// starts and supervises the local workers, restarts them, and returns the
// process exit code (0, 1 on worker failure, 2 on usage errors, 128+signal
// when stopped by SIGINT/SIGTERM).
int ddprun_main(int argc, char** argv);

}  // namespace ddp::launch
