/**
 * @file env.h
 * @brief Cluster environments: who am I, how many are we, where is rank 0.
 *
 * The counterpart of Lightning's ClusterEnvironment plugins. ddp_env_detect
 * reads the process environment and picks the first environment that
 * applies, in this order:
 *
 *  1. "torchelastic": RANK, GROUP_RANK, LOCAL_RANK and LOCAL_WORLD_SIZE all
 *     set (torchrun, ddprun). Also reads WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
 *  2. "slurm": SLURM_NTASKS set and SLURM_JOB_NAME not "bash"/"interactive".
 *     Rank SLURM_PROCID, local rank SLURM_LOCALID, node SLURM_NODEID, size
 *     SLURM_NTASKS; MASTER_ADDR or else the first host of SLURM_NODELIST
 *     (bracket ranges such as `node[01-04,07],gpu2` give `node01`);
 *     MASTER_PORT or else 15000 + the last 4 digits of SLURM_JOB_ID (12910
 *     without a job id).
 *  3. "lsf": LSB_JOBID, LSB_DJOB_RANKFILE, JSM_NAMESPACE_LOCAL_RANK and
 *     JSM_NAMESPACE_SIZE set. Rank JSM_NAMESPACE_RANK; the rank file's hosts
 *     after its first line (the launch node) give MASTER_ADDR (the first) and
 *     the node rank (this host's position among the distinct hosts);
 *     port 10000 + LSB_JOBID % 1000.
 *  4. "mpi": Open MPI (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE) or
 *     PMI (PMI_RANK/PMI_SIZE, MPI_LOCALRANKID/MPI_LOCALNRANKS). MASTER_ADDR
 *     (default 127.0.0.1) and MASTER_PORT (default 29500).
 *  5. "lightning": the plain environment, always applies. MASTER_ADDR
 *     (default 127.0.0.1), MASTER_PORT (required when WORLD_SIZE > 1; with one
 *     process 0 means "any free port"), WORLD_SIZE (default 1), LOCAL_RANK
 *     (default 0), NODE_RANK or else GROUP_RANK (default 0). The global rank is
 *     RANK when set, else NODE_RANK * LOCAL_WORLD_SIZE + LOCAL_RANK
 *     (LOCAL_WORLD_SIZE defaults to WORLD_SIZE, i.e. one node).
 *
 * "kubeflow" (KUBERNETES_PORT, MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; one
 * process per pod) is never auto-detected: ask for it with ddp_env_from_name.
 *
 * A malformed value (WORLD_SIZE=abc, RANK >= WORLD_SIZE, a port outside
 * 1..65535, an empty node list) fails with DDP_E_INVALID_ARGUMENT and a message
 * naming the variable and its value.
 *
 * Threading: an env is immutable after creation; it may be shared between
 * threads.
 */
#ifndef DDP_ENV_H
#define DDP_ENV_H

#include "ddp/common.h"

DDP_EXTERN_C_BEGIN

/** One process's place in a job (rank, world size, local rank, node rank, master address and port), read from a launcher's or cluster's variables; freed with ddp_env_free. */
typedef struct ddp_env ddp_env;

/**
 * Detects the cluster environment from the process environment.
 * @param[out] out new reference; NULL on error.
 */
DDP_API ddp_status ddp_env_detect(ddp_env **out);

/**
 * Like ddp_env_detect, but reads the variables from @p vars instead of the
 * process environment (for tests, and for programs that keep their own).
 *
 * @param[out] out new reference; NULL on error.
 * @param vars     NULL-terminated array of "NAME=value" strings (NULL: empty).
 * @param name     NULL to auto-detect, or one of "torchelastic", "slurm",
 *                 "lsf", "mpi", "lightning", "kubeflow" to force one.
 */
DDP_API ddp_status ddp_env_from_vars(ddp_env **out, const char *const *vars, const char *name);

/**
 * Reads the named environment (see the file comment) from the process
 * environment, without detection. Unknown names give DDP_E_INVALID_ARGUMENT.
 * @param[out] out new reference; NULL on error.
 */
DDP_API ddp_status ddp_env_from_name(ddp_env **out, const char *name);

/**
 * Builds an environment from explicit values (no variables read). The name
 * is "explicit".
 * @param[out] out new reference; NULL on error.
 * @param master_addr host of rank 0's rendezvous store (NULL: 127.0.0.1).
 */
DDP_API ddp_status ddp_env_new(ddp_env **out, int rank, int world_size, int local_rank,
                               int local_world_size, int node_rank,
                               const char *master_addr, int master_port);

/** @return the environment's name ("slurm", ...); borrowed; "" for NULL. */
DDP_API const char *ddp_env_name(const ddp_env *env);
/** @return the global rank, -1 for an invalid handle. */
DDP_API int ddp_env_rank(const ddp_env *env);
/** @return the number of processes, -1 for an invalid handle. */
DDP_API int ddp_env_world_size(const ddp_env *env);
/** @return the rank within this node, -1 for an invalid handle. */
DDP_API int ddp_env_local_rank(const ddp_env *env);
/** @return the number of processes on this node, -1 for an invalid handle. */
DDP_API int ddp_env_local_world_size(const ddp_env *env);
/** @return this node's index, -1 for an invalid handle. */
DDP_API int ddp_env_node_rank(const ddp_env *env);
/** @return rank 0's host (borrowed, lives as long as @p env); "" for NULL. */
DDP_API const char *ddp_env_master_addr(const ddp_env *env);
/** @return rank 0's rendezvous port (0: any free port, single process), -1 for NULL. */
DDP_API int ddp_env_master_port(const ddp_env *env);
/** Frees @p env; NULL is accepted. */
DDP_API void ddp_env_free(ddp_env *env);

DDP_EXTERN_C_END

#endif /* DDP_ENV_H */
