/**
 * @file model_averager.h
 * @brief Periodic model averaging (PyTorch's PeriodicModelAverager), the
 *        companion of post-local SGD.
 *
 * Call ddp_model_averager_step after every optimizer step. On the steps
 * where step >= warmup_steps and (step - warmup_steps) % period == 0, the
 * parameters are averaged over the group (flattened, divided by the group
 * size, all-reduced); the step counter then advances.
 *
 * Threading: not for concurrent use. The averager keeps its group alive: the
 * group handle may be freed first.
 */
#ifndef DDP_MODEL_AVERAGER_H
#define DDP_MODEL_AVERAGER_H

#include "ddp/common.h"
#include "ddp/group.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** PyTorch's PeriodicModelAverager: parameters averaged over a group every period steps; freed with ddp_model_averager_free. */
typedef struct ddp_model_averager ddp_model_averager;

/**
 * @param[out] out     new reference; NULL on error.
 * @param group        borrowed (usually the global group).
 * @param period       > 0 (DDP_E_INVALID_ARGUMENT otherwise).
 * @param warmup_steps >= 0.
 */
DDP_API ddp_status ddp_model_averager_new(ddp_model_averager **out, ddp_group *group, int64_t period,
                                          int64_t warmup_steps);

/** One optimizer step has been taken: average @p params (in place) if this step is due. Collective. */
DDP_API ddp_status ddp_model_averager_step(ddp_model_averager *avg, ddp_tensor *const *params, size_t n);

/** Frees @p avg; NULL is accepted. */
DDP_API void ddp_model_averager_free(ddp_model_averager *avg);

DDP_EXTERN_C_END

#endif /* DDP_MODEL_AVERAGER_H */
