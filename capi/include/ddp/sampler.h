/**
 * @file sampler.h
 * @brief Data sharding: each rank's sample indices for an epoch, exactly as
 *        torch.utils.data.DistributedSampler gives them (the sampler
 *        Lightning injects for DDP).
 *
 * With shuffle on, every rank draws the same permutation of
 * [0, dataset_size), seeded with seed + epoch by PyTorch's own generator, and
 * takes every num_replicas-th entry starting at its rank. Without drop_last
 * the list is padded by wrapping around to a multiple of num_replicas, so
 * every rank gets the same number of indices; with it, the tail is dropped.
 * Pure functions: no group, no state, safe from any thread.
 */
#ifndef DDP_SAMPLER_H
#define DDP_SAMPLER_H

#include "ddp/common.h"

DDP_EXTERN_C_BEGIN

/* 2 added unrepeated, 3 start; a caller of an earlier version is served within its own struct. */
/** The version of ::ddp_sampler_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_SAMPLER_OPTIONS_VERSION 3

/** DistributedSampler's keyword arguments. Initialise with DDP_SAMPLER_OPTIONS_INIT or ddp_sampler_options_init. */
typedef struct ddp_sampler_options {
  unsigned int version; /**< DDP_SAMPLER_OPTIONS_VERSION */
  int shuffle;          /**< 1 (default): a permutation seeded by seed + epoch; 0: 0, 1, 2, ... */
  int64_t seed;         /**< 0; the same on every rank */
  int drop_last;        /**< 0 (default): pad by wrapping around; 1: drop the tail */
  /* version 2 */
  int unrepeated;       /**< 0; 1: Lightning's UnrepeatedDistributedSampler, for evaluation and prediction: every
                             index exactly once over the ranks (rank r gets r, r + R, ... of the list), no padding,
                             so counts differ by at most one and drop_last is ignored. Its shuffle is seeded with
                             the epoch alone, as Lightning's (which ignores the seed) */
  /* version 3 */
  int64_t start;        /**< 0; a resumed epoch's position: entries of the epoch's list already trained on over every
                             rank (a checkpoint's samples_in_epoch, see ddp_checkpoint_info). The list from there is
                             padded (or trimmed) and sharded afresh, so a job resumed with another world size sees
                             each remaining sample once; with the world size that trained those entries, each rank
                             gets the tail of its unresumed indices */
} ddp_sampler_options;

/** An initialiser of ::ddp_sampler_options with the defaults: `ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;` */
#define DDP_SAMPLER_OPTIONS_INIT {DDP_SAMPLER_OPTIONS_VERSION, 1, 0, 0, 0, 0}

/**
 * Fills @p opts with the defaults of @p version (1 to 3; an earlier version writes only its own fields).
 * @return DDP_OK, or DDP_E_INVALID_ARGUMENT for NULL or an unknown version.
 */
DDP_API ddp_status ddp_sampler_options_init(ddp_sampler_options *opts, unsigned int version);

/**
 * The number of indices each rank gets (DistributedSampler's num_samples);
 * with the unrepeated sampler, ddp_sampler_indices' count (it depends on the rank).
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for a negative @p dataset_size,
 *         @p num_replicas < 1 or a NULL @p out.
 */
DDP_API ddp_status ddp_sampler_num_samples(int64_t dataset_size, int num_replicas, int drop_last, int64_t *out);

/**
 * Rank @p rank's indices for @p epoch, in order.
 *
 * @param opts      NULL for the defaults.
 * @param out       receives min(cap, count) indices; may be NULL when @p cap is 0.
 * @param cap       capacity of @p out.
 * @param[out] count the number of indices this rank gets (may be NULL); call
 *                  with cap 0 first to size @p out.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for a rank outside [0, num_replicas),
 *         a negative start, a shuffled list whose seed + @p epoch is below
 *         -2^63 (torch.Generator.manual_seed's ValueError; a sum past
 *         2^63 - 1 seeds as in PyTorch) and the cases of
 *         ddp_sampler_num_samples;
 *         DDP_E_NOMEM where the epoch's list of @p dataset_size indices does
 *         not fit in memory (only with @p cap > 0: a count alone lists nothing).
 */
DDP_API ddp_status ddp_sampler_indices(int64_t dataset_size, int num_replicas, int rank, int64_t epoch,
                                       const ddp_sampler_options *opts, int64_t *out, size_t cap, size_t *count);

DDP_EXTERN_C_END

#endif /* DDP_SAMPLER_H */
