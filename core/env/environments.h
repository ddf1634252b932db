// One reader per cluster environment (each in its own file) and the
// detection predicates used by detect_cluster_env.
#pragma once

#include <string>

#include "env/cluster_env.h"

namespace ddp::core::environments {

bool torchelastic_detect(const EnvLookup& env);
ClusterEnv torchelastic_read(const EnvLookup& env);

bool slurm_detect(const EnvLookup& env);
ClusterEnv slurm_read(const EnvLookup& env);
// First host of a SLURM node list: "node[01-04,07],gpu2" -> "node01".
std::string slurm_first_host(const std::string& nodelist);

bool lsf_detect(const EnvLookup& env);
ClusterEnv lsf_read(const EnvLookup& env);

bool mpi_detect(const EnvLookup& env);
ClusterEnv mpi_read(const EnvLookup& env);

ClusterEnv lightning_read(const EnvLookup& env);

bool kubeflow_detect(const EnvLookup& env);
ClusterEnv kubeflow_read(const EnvLookup& env);

}  // namespace ddp::core::environments
