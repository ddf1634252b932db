// ddprun's agent on one node: meets the other nodes' agents in the store,
// starts and supervises the local workers, restarts every node's workers
// together (--max-restarts), and reports the outcome.
#pragma once

#include "args.h"

namespace ddprun {

// Runs the job; returns ddprun's exit code: 0 when every node's workers
// succeeded, 1 on a failure, 128+signal when stopped by SIGINT/SIGTERM/SIGHUP
// (acted on within about a second, whatever the agent is waiting for).
int run_agent(DdprunArgs a);

}  // namespace ddprun
