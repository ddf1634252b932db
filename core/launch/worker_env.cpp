#include "launch/worker_env.h"

#include <cstdlib>

#include "launch/supervisor.h"

namespace ddp::core::launch {

std::vector<std::string> worker_env(const WorkerPlace& w,
                                    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::vector<std::pair<std::string, std::string>> set = {
      {"LOCAL_RANK", std::to_string(w.local_rank)},
      {"RANK", std::to_string(w.rank)},
      {"GROUP_RANK", std::to_string(w.node_rank)},
      {"ROLE_RANK", std::to_string(w.rank)},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", std::to_string(w.local_world_size)},
      {"WORLD_SIZE", std::to_string(w.world_size)},
      {"GROUP_WORLD_SIZE", std::to_string(w.nnodes)},
      {"ROLE_WORLD_SIZE", std::to_string(w.world_size)},
      {"NODE_RANK", std::to_string(w.node_rank)},
      {"MASTER_ADDR", w.master_addr},
      {"MASTER_PORT", std::to_string(w.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(w.restart)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(w.max_restarts)},
      {"TORCHELASTIC_RUN_ID", w.run_id},
      {"DDP_JOB_ID", w.job_id},
  };
  if (w.agent_hosts_store) set.push_back({"TORCHELASTIC_USE_AGENT_STORE", "True"});
  if (!std::getenv("OMP_NUM_THREADS") && w.local_world_size > 1) set.push_back({"OMP_NUM_THREADS", "1"});
  set.insert(set.end(), extra.begin(), extra.end());
  // Inherited values of these are dropped; `set` may still give them anew
  // (rank 0's DDP_MASTER_LISTEN_FD under ddp_spawn).
  std::vector<std::string> drop = {"TORCHELASTIC_ERROR_FILE", "DDP_MASTER_LISTEN_FD"};
  if (!w.agent_hosts_store) drop.push_back("TORCHELASTIC_USE_AGENT_STORE");
  return child_environment(set, drop);
}

}  // namespace ddp::core::launch
