// Lightning's default environment: plain variables, set by the user or by
// Lightning's own popen launcher (MASTER_ADDR, MASTER_PORT, WORLD_SIZE,
// NODE_RANK, LOCAL_RANK).
#include "common/error.h"
#include "env/env_vars.h"
#include "env/environments.h"

namespace ddp::core::environments {
using namespace envvars;

ClusterEnv lightning_read(const EnvLookup& env) {
  ClusterEnv e;
  e.name = "lightning";
  e.world_size = get_int(env, "WORLD_SIZE", 1, 1, 1 << 24);
  e.local_world_size = get_int(env, "LOCAL_WORLD_SIZE", e.world_size, 1, e.world_size);
  e.local_rank = get_int(env, "LOCAL_RANK", 0, 0, e.local_world_size - 1);
  int group_rank = get_int(env, "GROUP_RANK", 0, 0, 1 << 24);
  e.node_rank = get_int(env, "NODE_RANK", group_rank, 0, 1 << 24);
  if (has(env, "RANK")) {
    e.rank = get_int(env, "RANK", 0, 0, e.world_size - 1);
  } else {
    long rank = static_cast<long>(e.node_rank) * e.local_world_size + e.local_rank;
    check_arg(rank < e.world_size,
              "NODE_RANK=" + std::to_string(e.node_rank) + " with LOCAL_RANK=" +
                  std::to_string(e.local_rank) + " gives rank " + std::to_string(rank) +
                  " >= WORLD_SIZE=" + std::to_string(e.world_size) +
                  "; set RANK or LOCAL_WORLD_SIZE");
    e.rank = static_cast<int>(rank);
  }
  e.master_addr = get_str(env, "MASTER_ADDR", "127.0.0.1");
  if (auto port = env("MASTER_PORT")) {
    e.master_port = parse_port("MASTER_PORT", *port);
  } else {
    check_arg(e.world_size == 1, "MASTER_PORT is not set and WORLD_SIZE=" +
                                     std::to_string(e.world_size) +
                                     ": every rank must agree on rank 0's port");
    e.master_port = 0;
  }
  return e;
}

}  // namespace ddp::core::environments
