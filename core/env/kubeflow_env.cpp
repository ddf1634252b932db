// Kubeflow's PyTorchJob: the operator sets MASTER_ADDR, MASTER_PORT,
// WORLD_SIZE and RANK in each pod, inside Kubernetes.
#include "common/error.h"
#include "env/env_vars.h"
#include "env/environments.h"

namespace ddp::core::environments {
using namespace envvars;

bool kubeflow_detect(const EnvLookup& env) {
  return has(env, "KUBERNETES_PORT") && has(env, "MASTER_ADDR") && has(env, "MASTER_PORT") &&
         has(env, "WORLD_SIZE") && has(env, "RANK");
}

// Kubeflow's PyTorchJob: one process per pod, so the pod's rank is its node.
ClusterEnv kubeflow_read(const EnvLookup& env) {
  const char* who = "kubeflow";
  ClusterEnv e;
  e.name = who;
  e.world_size = require_int(env, "WORLD_SIZE", 1, 1 << 24, who);
  e.rank = require_int(env, "RANK", 0, e.world_size - 1, who);
  e.local_rank = 0;
  e.local_world_size = 1;
  e.node_rank = e.rank;
  e.master_addr = require_str(env, "MASTER_ADDR", who);
  e.master_port = parse_port("MASTER_PORT", require_str(env, "MASTER_PORT", who));
  return e;
}

}  // namespace ddp::core::environments
