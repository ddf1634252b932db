// Processes started by an MPI launcher (Open MPI's mpirun, MPICH/Intel MPI's
// hydra). libddp does not link MPI: it reads the launcher's variables and
// rendezvouses over TCP like every other environment.
#include "env/env_vars.h"
#include "env/environments.h"

namespace ddp::core::environments {
using namespace envvars;

namespace {
struct MpiNames {
  const char *rank, *size, *local_rank, *local_size;
};
const MpiNames kOpenMpi{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
const MpiNames kPmi{"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};
}  // namespace

bool mpi_detect(const EnvLookup& env) {
  return (has(env, kOpenMpi.rank) && has(env, kOpenMpi.size)) ||
         (has(env, kPmi.rank) && has(env, kPmi.size));
}

ClusterEnv mpi_read(const EnvLookup& env) {
  const char* who = "mpi";
  const MpiNames& n = has(env, kOpenMpi.size) ? kOpenMpi : kPmi;
  ClusterEnv e;
  e.name = who;
  e.world_size = require_int(env, n.size, 1, 1 << 24, who);
  e.rank = require_int(env, n.rank, 0, e.world_size - 1, who);
  e.local_world_size = get_int(env, n.local_size, e.world_size, 1, e.world_size);
  e.local_rank = get_int(env, n.local_rank, e.rank % e.local_world_size, 0, e.local_world_size - 1);
  // Block placement (the launchers' default): node = rank / ranks per node.
  e.node_rank = e.rank / e.local_world_size;
  e.master_addr = get_str(env, "MASTER_ADDR", "127.0.0.1");
  e.master_port = parse_port("MASTER_PORT", get_str(env, "MASTER_PORT", "29500"));
  return e;
}

}  // namespace ddp::core::environments
