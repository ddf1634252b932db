/**
 * @file group.h
 * @brief Process groups: Lightning's init_dist_connection and new_subgroups.
 *
 * ddp_group_init joins every rank of the job through a TCPStore hosted by
 * rank 0 at the environment's MASTER_ADDR:MASTER_PORT (the rendezvous that
 * torchrun and SLURM jobs use), counts the ranks in, and connects the
 * backend: "shm" (CPU tensors; shared memory between the ranks of one host,
 * Gloo between hosts), "gloo" (CPU tensors over TCP) or "nccl" (CUDA
 * tensors). "shm" is the default for CPU; where some rank cannot map the
 * shared segment (a /proc that hides other processes) the group uses "gloo"
 * on every rank, and ddp_group_backend says so.
 *
 * Failure model: a collective that runs past its timeout fails with
 * DDP_E_TIMEOUT; a peer that died or whose connection broke gives
 * DDP_E_PEER_FAILED. Either failure is published to the other ranks through
 * the store, so that every rank of the group stops with the same status
 * (not only the neighbours of the dead rank), and the group is broken from
 * then on: every later call on it returns DDP_E_STATE. Free it and create a
 * new one.
 *
 * Threading: a group may move between threads but is not for concurrent use;
 * all ranks must issue the same collectives in the same order.
 * Signals: the first ddp_group_init ignores SIGPIPE if its disposition is
 * still the default, so that a write to a dead peer's socket cannot kill the
 * process (Python does the same).
 * Descriptors: ddp_group_init and ddp_group_new_subgroups open a closed
 * standard stream (0, 1, 2) onto /dev/null before opening anything, so that
 * no connection takes its number and what the program prints never goes
 * into a peer's protocol; the descriptors of a group's Gloo connections are
 * close-on-exec, so that a program the rank starts does not hold them open.
 */
#ifndef DDP_GROUP_H
#define DDP_GROUP_H

#include "ddp/common.h"
#include "ddp/env.h"

DDP_EXTERN_C_BEGIN

/** A process group: the ranks that run collectives together, over a backend; freed with ddp_group_free. */
typedef struct ddp_group ddp_group;

/** The version of ::ddp_group_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_GROUP_OPTIONS_VERSION 1

/** Options of ddp_group_init. Initialise with DDP_GROUP_OPTIONS_INIT or ddp_group_options_init. */
typedef struct ddp_group_options {
  unsigned int version;   /**< DDP_GROUP_OPTIONS_VERSION */
  const char *backend;    /**< "shm", "gloo", "nccl", or NULL: "nccl" for a CUDA device, else "shm" */
  int64_t timeout_ms;     /**< rendezvous and every collective; 0: 1800000 (30 min, Lightning's default) */
  ddp_device device;      /**< device of the tensors this group works on (CPU) */
} ddp_group_options;

/** An initialiser of ::ddp_group_options with the defaults: `ddp_group_options o = DDP_GROUP_OPTIONS_INIT;` */
#define DDP_GROUP_OPTIONS_INIT {DDP_GROUP_OPTIONS_VERSION, NULL, 0, {DDP_DEVICE_CPU, 0}}

/**
 * Fills @p opts with the defaults of @p version.
 * @return DDP_OK, or DDP_E_INVALID_ARGUMENT for NULL or an unknown version.
 */
DDP_API ddp_status ddp_group_options_init(ddp_group_options *opts, unsigned int version);

/**
 * Joins the process group of this job (collective: every rank calls it).
 *
 * @param[out] out new reference; NULL on error.
 * @param env      cluster environment (borrowed, may be freed afterwards);
 *                 NULL: ddp_env_detect().
 * @param opts     NULL for defaults.
 * @return DDP_OK; DDP_E_TIMEOUT when not every rank arrived in time (the
 *         message says how many of how many did) or rank 0's store could not
 *         be reached; DDP_E_IO when rank 0 cannot listen on MASTER_PORT;
 *         DDP_E_UNSUPPORTED for nccl without CUDA; DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_group_init(ddp_group **out, const ddp_env *env, const ddp_group_options *opts);

/**
 * torch.distributed.new_subgroups: splits @p parent into consecutive blocks
 * of @p group_size ranks and returns the block this rank belongs to
 * (collective over @p parent, in the same order on every rank).
 *
 * @param parent      the group to split (borrowed; may be freed before the subgroup).
 * @param group_size  ranks per subgroup; 0: one subgroup per node (the
 *                    environment's local world size). Must divide the size.
 * @param[out] out    new reference; NULL on error.
 */
DDP_API ddp_status ddp_group_new_subgroups(ddp_group *parent, int group_size, ddp_group **out);

/** @return this process's rank in @p g, -1 for an invalid handle. */
DDP_API int ddp_group_rank(const ddp_group *g);
/** @return the number of ranks in @p g, -1 for an invalid handle. */
DDP_API int ddp_group_size(const ddp_group *g);
/** @return "shm", "gloo" or "nccl" (static): the backend in use; "" for an invalid handle. */
DDP_API const char *ddp_group_backend(const ddp_group *g);
/** @return the group's timeout in milliseconds, -1 for an invalid handle. */
DDP_API int64_t ddp_group_timeout_ms(const ddp_group *g);
/**
 * Changes the timeout of later collectives on @p g (> 0), and of every later
 * call on @p g's own connections to the rendezvous store (a subgroup has
 * its own, so its timeout and its parent's are set apart). A collective or
 * a subgroup's making that fails (a peer or the store host stopped or dead)
 * reports so within it.
 */
DDP_API ddp_status ddp_group_set_timeout(ddp_group *g, int64_t timeout_ms);
/**
 * Turns the cross-rank call checks on or off (the default comes from the
 * environment: DDP_DEBUG=DETAIL turns them on). With them on, before each
 * collective the ranks exchange what they are about to call (operation,
 * reduce op, dtype, shape, root and a sequence number) in one small
 * all_gather, and if any differ every rank gets DDP_E_INVALID_ARGUMENT naming
 * the ranks and how they differ; the group stays usable. Costs one extra
 * small collective per call (see the README's failure section). Every rank
 * must use the same setting: call it on all ranks, between collectives.
 * @return DDP_OK, or DDP_E_INVALID_ARGUMENT for an invalid handle.
 */
DDP_API ddp_status ddp_group_set_debug_detail(ddp_group *g, int enabled);
/** @return 1 when the cross-rank call checks are on for @p g, else 0 (also for an invalid handle). */
DDP_API int ddp_group_debug_detail(const ddp_group *g);
/** @return 1 when an earlier timeout or peer failure broke @p g, else 0. */
DDP_API int ddp_group_is_broken(const ddp_group *g);

/**
 * Frees @p g; NULL is accepted. Works still pending on it must have been
 * freed first. Freeing a broken group never blocks (its backend's stuck
 * thread is abandoned rather than joined).
 */
DDP_API void ddp_group_free(ddp_group *g);

DDP_EXTERN_C_END

#endif /* DDP_GROUP_H */
