/**
 * @file metric.h
 * @brief A logged value with Lightning's epoch semantics:
 *        self.log(name, value, on_epoch=True, reduce_fx=..., sync_dist=...).
 *
 * Update it once per batch with the batch's value and size; at the epoch's
 * end, ddp_metric_compute gives what Lightning logs for the epoch: for
 * "mean" the batch-size weighted mean, and with a strategy (sync_dist) the
 * value over all ranks. The arithmetic is Lightning's own, step for step
 * (float32 accumulation; the mean's sums and counts each averaged over the
 * ranks, the count truncated to an integer as Lightning's _sync_ddp leaves
 * it; so when the total count is not a multiple of the world size the mean
 * is Lightning's value, not the exact weighted mean).
 */
#ifndef DDP_METRIC_H
#define DDP_METRIC_H

#include "ddp/common.h"
#include "ddp/strategy.h"

DDP_EXTERN_C_BEGIN

/** A metric accumulated over steps on each rank and reduced over the ranks on compute; freed with ddp_metric_free. */
typedef struct ddp_metric ddp_metric;

/** Lightning's reduce_fx. */
typedef enum ddp_metric_reduce {
  DDP_METRIC_MEAN = 0, /**< the default: weighted by batch size */
  DDP_METRIC_SUM = 1,
  DDP_METRIC_MAX = 2,
  DDP_METRIC_MIN = 3,
  DDP_METRIC_REDUCE_FORCE_INT = 0x7fffffff
} ddp_metric_reduce;

/** @param[out] out new reference. @return DDP_E_INVALID_ARGUMENT for an unknown reduction. */
DDP_API ddp_status ddp_metric_new(ddp_metric **out, ddp_metric_reduce reduce);

/** One batch: its value and its size (the mean's weight; Lightning's batch_size). */
DDP_API ddp_status ddp_metric_update(ddp_metric *m, double value, int64_t batch_size);

/**
 * The epoch's value.
 * @param s NULL: this rank's own (sync_dist=False). A strategy after setup
 *        (sync_dist=True): collective over its group, every rank calls it,
 *        a dead peer is a status as for any collective.
 */
DDP_API ddp_status ddp_metric_compute(const ddp_metric *m, ddp_strategy *s, double *out);

/** Starts a new epoch (Lightning resets its results at each epoch's start). */
DDP_API ddp_status ddp_metric_reset(ddp_metric *m);

/** Frees @p m; NULL is accepted. */
DDP_API void ddp_metric_free(ddp_metric *m);

DDP_EXTERN_C_END

#endif /* DDP_METRIC_H */
