// Cluster environments: Lightning's ClusterEnvironment plugins as plain data.
// Pure C++ (no LibTorch), so the detection tables are cheap to test.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace ddp::core {

struct ClusterEnv {
  std::string name;  // "torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow", "explicit"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: any free port (single process only)
};

// Looks up one variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The process environment.
EnvLookup process_env_lookup();

// Detection in Lightning's order; see capi/include/ddp/env.h for the rules.
ClusterEnv detect_cluster_env(const EnvLookup& env);

// One environment by name, without detection. Throws Status::InvalidArgument
// for an unknown name or malformed variables.
ClusterEnv read_cluster_env(const std::string& name, const EnvLookup& env);

// Checks the invariants every environment must satisfy (sizes >= 1, ranks in
// range, port in range); `source` names where the values came from.
void validate_cluster_env(const ClusterEnv& env, const std::string& source);

}  // namespace ddp::core