// The environment a launcher (ddp_spawn, ddprun) hands each worker.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ddp::core::launch {

// Where one worker stands in its job.
struct WorkerPlace {
  int rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int world_size = 1;
  int node_rank = 0;
  int nnodes = 1;
  std::string master_addr;
  int master_port = 0;
  std::string job_id;  // DDP_JOB_ID: the prefix of the job's store keys (see comm/rendezvous.h)
  int restart = 0;
  int max_restarts = 0;
  std::string run_id = "none";
  // ddprun's agent hosts the store, and every rank is a client of it (as
  // under torchrun); under ddp_spawn rank 0 hosts its own.
  bool agent_hosts_store = false;
};

// torchrun's variables for `w` (they detect as a TorchElastic environment,
// see env/torchelastic_env.cpp), then `extra`, over this process's
// environment; OMP_NUM_THREADS=1 when several workers share the host and the
// user did not choose. A launcher's own private variables
// (DDP_MASTER_LISTEN_FD, and the agent-store flag where rank 0 hosts the
// store) are not inherited.
std::vector<std::string> worker_env(const WorkerPlace& w,
                                    const std::vector<std::pair<std::string, std::string>>& extra = {});

}  // namespace ddp::core::launch
