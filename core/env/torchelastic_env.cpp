// TorchElastic (torchrun, ddprun): everything comes from the launcher.
#include "env/env_vars.h"
#include "env/environments.h"

namespace ddp::core::environments {
using namespace envvars;

bool torchelastic_detect(const EnvLookup& env) {
  return has(env, "RANK") && has(env, "GROUP_RANK") && has(env, "LOCAL_RANK") &&
         has(env, "LOCAL_WORLD_SIZE");
}

ClusterEnv torchelastic_read(const EnvLookup& env) {
  const char* who = "torchelastic";
  ClusterEnv e;
  e.name = who;
  e.world_size = require_int(env, "WORLD_SIZE", 1, 1 << 24, who);
  e.rank = require_int(env, "RANK", 0, e.world_size - 1, who);
  e.local_world_size = require_int(env, "LOCAL_WORLD_SIZE", 1, e.world_size, who);
  e.local_rank = require_int(env, "LOCAL_RANK", 0, e.local_world_size - 1, who);
  e.node_rank = require_int(env, "GROUP_RANK", 0, 1 << 24, who);
  e.master_addr = require_str(env, "MASTER_ADDR", who);
  e.master_port = parse_port("MASTER_PORT", require_str(env, "MASTER_PORT", who));
  return e;
}

}  // namespace ddp::core::environments
