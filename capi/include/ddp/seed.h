/**
 * @file seed.h
 * @brief Lightning's seed_everything and the Trainer's deterministic flag:
 *        the random numbers LibTorch draws (dropout, initialisation,
 *        randperm) made reproducible, and equal to Python's for the same
 *        seed on the same wheel.
 *
 * Lightning seeds every rank with the same seed (so every rank draws the
 * same dropout masks for the same shapes); rank-dependent seeds are only
 * its data loader workers', which a C program does not have.
 */
#ifndef DDP_SEED_H
#define DDP_SEED_H

#include "ddp/common.h"

DDP_EXTERN_C_BEGIN

/**
 * seed_everything(seed, workers): seeds torch's CPU generator, and every
 * CUDA device's once CUDA is loaded (with the CUDA accelerator, call it
 * after ddp_strategy_setup_environment, or again there), as
 * torch.manual_seed; sets PL_GLOBAL_SEED and PL_SEED_WORKERS in the
 * environment, so processes started afterwards (the local ranks a strategy
 * launches) see them, as Lightning's do.
 * @param seed in [0, 2^32 - 1]; a negative value means "none": PL_GLOBAL_SEED's value, else 0.
 * @param[out] used may be NULL: the seed set.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a seed out of bounds or a
 *         PL_GLOBAL_SEED that is not an integer (nothing is seeded then).
 */
DDP_API ddp_status ddp_seed_everything(int64_t seed, int workers, int64_t *used);

/**
 * Lightning's reset_seed(): seeds again with PL_GLOBAL_SEED when it is set.
 * @param[out] seeded may be NULL: 1 when it seeded, 0 when PL_GLOBAL_SEED is unset.
 */
DDP_API ddp_status ddp_reset_seed(int *seeded);

/**
 * The Trainer's deterministic flag: torch.use_deterministic_algorithms(on,
 * warn_only), cuDNN deterministic and not benchmarking, and
 * CUBLAS_WORKSPACE_CONFIG=:4096:8 unless it is set. With it on, an operator
 * that has no deterministic implementation fails (or warns, with
 * @p warn_only) instead of giving different results run to run.
 */
DDP_API ddp_status ddp_set_deterministic(int on, int warn_only);

/** @return 1 when deterministic algorithms are on, else 0. */
DDP_API int ddp_is_deterministic(void);

DDP_EXTERN_C_END

#endif /* DDP_SEED_H */
