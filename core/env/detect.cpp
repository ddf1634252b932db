#include <cstdlib>

#include "common/error.h"
#include "env/cluster_env.h"
#include "env/environments.h"

namespace ddp::core {

EnvLookup process_env_lookup() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

void validate_cluster_env(const ClusterEnv& e, const std::string& source) {
  auto where = " (" + source + " environment)";
  check_arg(e.world_size >= 1, "world size " + std::to_string(e.world_size) + " < 1" + where);
  check_arg(e.rank >= 0 && e.rank < e.world_size,
            "rank " + std::to_string(e.rank) + " is outside [0, " +
                std::to_string(e.world_size) + ")" + where);
  check_arg(e.local_world_size >= 1 && e.local_world_size <= e.world_size,
            "local world size " + std::to_string(e.local_world_size) + " is outside [1, " +
                std::to_string(e.world_size) + "]" + where);
  check_arg(e.local_rank >= 0 && e.local_rank < e.local_world_size,
            "local rank " + std::to_string(e.local_rank) + " is outside [0, " +
                std::to_string(e.local_world_size) + ")" + where);
  check_arg(e.node_rank >= 0, "node rank " + std::to_string(e.node_rank) + " < 0" + where);
  check_arg(!e.master_addr.empty(), "master address is empty" + where);
  check_arg(e.master_port >= 0 && e.master_port <= 65535,
            "master port " + std::to_string(e.master_port) + " is outside [0, 65535]" + where);
  check_arg(e.master_port != 0 || e.world_size == 1,
            "master port 0 (any free port) needs world size 1" + where);
}

ClusterEnv read_cluster_env(const std::string& name, const EnvLookup& env) {
  using namespace environments;
  ClusterEnv e;
  if (name == "torchelastic") e = torchelastic_read(env);
  else if (name == "slurm") e = slurm_read(env);
  else if (name == "lsf") e = lsf_read(env);
  else if (name == "mpi") e = mpi_read(env);
  else if (name == "lightning") e = lightning_read(env);
  else if (name == "kubeflow") e = kubeflow_read(env);
  else
    fail(Status::InvalidArgument, "unknown cluster environment '" + name +
                                     "' (expected torchelastic, slurm, lsf, mpi, lightning or kubeflow)");
  validate_cluster_env(e, name);
  return e;
}

ClusterEnv detect_cluster_env(const EnvLookup& env) {
  using namespace environments;
  if (torchelastic_detect(env)) return read_cluster_env("torchelastic", env);
  if (slurm_detect(env)) return read_cluster_env("slurm", env);
  if (lsf_detect(env)) return read_cluster_env("lsf", env);
  if (mpi_detect(env)) return read_cluster_env("mpi", env);
  return read_cluster_env("lightning", env);
}

}  // namespace ddp::core