/**
 * @file reducer.h
 * @brief The DDP engine for gradient buffers owned by the caller.
 *
 * A reducer groups gradients into buckets (in reverse registration order,
 * the first bucket capped at first_bucket_mb, the rest at bucket_cap_mb;
 * one dtype and device per bucket) and all-reduces each bucket the moment
 * its last gradient is marked ready, so communication overlaps the rest of
 * backward. ddp_reducer_finish waits for every bucket and leaves, in each
 * gradient buffer, the average over the group, computed as PyTorch's DDP
 * computes it (gradient * (1/world) then SUM), so results can match bit for bit.
 *
 * Buckets start in index order on every rank, whatever order gradients
 * become ready in, so ranks always issue the same collectives.
 *
 * On the shm backend (one host, float32/float64 gradients, no comm hook,
 * no gradient_as_bucket_view) a bucket's all-reduce runs over its gradient
 * buffers where they lie, with the same bits: nothing is copied into the
 * bucket or back. A buffer therefore belongs to the reducer from its
 * mark_ready until finish: it may hold partial results in between, and a
 * step that fails may leave it partly averaged.
 *
 * Threading: not for concurrent use; mark_ready and finish are called from
 * the thread that runs backward. The reducer keeps its group alive: the
 * group handle may be freed before the reducer (bindings free in any order).
 */
#ifndef DDP_REDUCER_H
#define DDP_REDUCER_H

#include "ddp/comm_hook.h"
#include "ddp/common.h"
#include "ddp/group.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** DDP's gradient reducer over a fixed list of gradients, in buckets; freed with ddp_reducer_free. */
typedef struct ddp_reducer ddp_reducer;

/* 2 added static_graph. A caller built against version 1 keeps working:
 * libddp reads and writes only version 1's fields for it. */
/** The version of ::ddp_reducer_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_REDUCER_OPTIONS_VERSION 2

/** Options of ddp_reducer_new. Initialise with DDP_REDUCER_OPTIONS_INIT or ddp_reducer_options_init. */
typedef struct ddp_reducer_options {
  unsigned int version;          /**< DDP_REDUCER_OPTIONS_VERSION */
  double bucket_cap_mb;          /**< 25 */
  double first_bucket_mb;        /**< 1 */
  int find_unused_parameters;    /**< 0: every gradient must be marked ready each step; 1: unmarked ones count as zeros */
  int gradient_as_bucket_view;   /**< 1: gradients live in the bucket storage (see ddp_reducer_gradient); on the shm backend (one host, CPU) that storage is memory every rank maps, reduced where it lies: the fastest path there */
  int broadcast_parameters;      /**< 1: rank 0's parameters are broadcast at creation */
  /**
   * 1: @p params are LibTorch leaf tensors that require grad (wrapped with
   * ddp_tensor_from_aten); @p grads must be NULL. Hooks on their gradient
   * accumulators mark each ready during backward, and the end of backward
   * runs ddp_reducer_finish: a plain loss.backward() leaves averaged
   * .grad()s, as with PyTorch's DistributedDataParallel.
   */
  int autograd_hooks;
  /**
   * 1: uneven inputs (PyTorch's Join). Every synchronised step starts with a
   * small all-reduce counting the ranks still training; a rank out of data
   * calls ddp_reducer_join, and averages are taken over the ranks still
   * training. Every rank must use the same setting.
   */
  int join_enabled;
  /**
   * 1: PyTorch's static_graph (version 2). The first synchronised step only
   * records how often each gradient is marked ready and reduces every bucket
   * when it finishes (unmarked gradients as zeros). Later steps must mark
   * the same gradients as often: those never marked take part as zeros
   * without being waited for, and a gradient marked where the first step did
   * not, or missing where it did, is DDP_E_STATE naming it (the step is then
   * dropped). After the second step the buckets are rebuilt in the order the
   * gradients became ready in it (rank 0's), the unused ones last, as
   * PyTorch rebuilds them. Except with gradient_as_bucket_view on caller
   * buffers (no autograd_hooks): there the buckets keep the layout they
   * were made with (first_bucket_mb, then bucket_cap_mb, in reverse), so
   * that every view ddp_reducer_gradient gave stays the gradient's storage.
   */
  int static_graph;
} ddp_reducer_options;

/** An initialiser of ::ddp_reducer_options with the defaults: `ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;` */
#define DDP_REDUCER_OPTIONS_INIT {DDP_REDUCER_OPTIONS_VERSION, 25.0, 1.0, 0, 0, 1, 0, 0, 0}

/** Fills @p opts with the defaults of @p version (1 or 2; version 1 writes only its own fields). */
DDP_API ddp_status ddp_reducer_options_init(ddp_reducer_options *opts, unsigned int version);

/**
 * Creates a reducer (collective when broadcast_parameters is on).
 *
 * @param[out] out  new reference; NULL on error.
 * @param group     borrowed; the reducer keeps the group itself alive, so the
 *                  handle may be freed first.
 * @param params    @p n parameters (borrowed handles; their memory is written by
 *                  the broadcast and must outlive the reducer), or NULL when
 *                  broadcast_parameters is 0.
 * @param grads     @p n contiguous floating-point gradient buffers (the memory
 *                  is read and written in place and must outlive the reducer).
 *                  With gradient_as_bucket_view, NULL entries are allowed
 *                  (shape from params); use ddp_reducer_gradient for the buffer.
 * @param n         number of parameters (> 0).
 * @param opts      NULL for defaults.
 */
DDP_API ddp_status ddp_reducer_new(ddp_reducer **out, ddp_group *group, ddp_tensor *const *params,
                                   ddp_tensor *const *grads, size_t n, const ddp_reducer_options *opts);

/**
 * Gradient @p index is final for this step. When it completes its bucket
 * (and every earlier bucket is complete) the bucket's all-reduce starts.
 * Marking the same gradient twice in a step is DDP_E_STATE. Under
 * ddp_reducer_set_sync(r, 0) this does nothing.
 */
DDP_API ddp_status ddp_reducer_mark_ready(ddp_reducer *r, size_t index);

/**
 * Ends the step: waits for every bucket and writes the averaged gradients
 * into the buffers. With find_unused_parameters, gradients not marked ready
 * take part as zeros; without it they fail the call with DDP_E_STATE naming
 * their indices (the step stays open: mark them and call again). Cheap when
 * every bucket has already arrived. Under set_sync(r, 0) this does nothing.
 *
 * On a CUDA group with NCCL (and no comm hook with a host step), "waits" is
 * stream-ordered, as in PyTorch's DDP: the call returns once the buckets
 * are enqueued, and the calling thread's current CUDA stream waits for
 * them, so work queued on that stream afterwards (the optimizer step, a
 * copy to the host) sees the averaged gradients; another stream must wait
 * on that one first. A failure found later (a timeout, a dead peer) is
 * returned, with its status, by the next call on this reducer.
 */
DDP_API ddp_status ddp_reducer_finish(ddp_reducer *r);

/**
 * no_sync / block_backward_sync: with @p enabled = 0, steps neither mark nor
 * reduce; gradients accumulate in the caller's buffers, and the next
 * synchronised step reduces the accumulated sum (PyTorch's no_sync). Call
 * it between steps: a change after gradients were marked ready in this step
 * is DDP_E_STATE, and nothing changes.
 */
DDP_API ddp_status ddp_reducer_set_sync(ddp_reducer *r, int enabled);

/**
 * This rank has run out of data (uneven inputs; needs join_enabled). Shadows
 * the steps of the ranks still training (contributing nothing) and returns
 * once every rank has joined. Call it between steps.
 */
DDP_API ddp_status ddp_reducer_join(ddp_reducer *r);

/**
 * Sets the communication hook that reduces each bucket (NULL: the built-in
 * path, PyTorch's reducer without a hook). The reducer keeps its own
 * reference; @p hook may be freed afterwards. Call between steps, with the
 * same kind of hook on every rank. DDP_E_STATE when @p hook keeps state
 * between steps (PowerSGD, post-local SGD, or a wrapper of one) and another
 * reducer holds it (comm_hook.h); this reducer's hook is then unchanged.
 */
DDP_API ddp_status ddp_reducer_set_comm_hook(ddp_reducer *r, const ddp_comm_hook *hook);

/** @return the number of buckets, 0 for an invalid handle. */
DDP_API size_t ddp_reducer_bucket_count(const ddp_reducer *r);

/**
 * The parameter indices of bucket @p bucket, in bucket order.
 * @param[out] out    caller's array of @p cap entries (may be NULL with cap 0).
 * @param[out] count  the bucket's number of parameters (even when > cap).
 */
DDP_API ddp_status ddp_reducer_bucket_indices(const ddp_reducer *r, size_t bucket, size_t *out, size_t cap,
                                              size_t *count);

/**
 * @param[out] out new reference to gradient @p index's buffer: with
 *                 gradient_as_bucket_view a view into the bucket storage
 *                 (write the gradient there), otherwise the caller's buffer.
 *                 Without autograd_hooks it stays the gradient's storage for
 *                 the reducer's life; with them use the parameter's .grad,
 *                 which a static_graph rebuild moves, as PyTorch does.
 */
DDP_API ddp_status ddp_reducer_gradient(const ddp_reducer *r, size_t index, ddp_tensor **out);

/**
 * Frees @p r; NULL is accepted. Buckets still in flight are waited for.
 * Called from the reducer's own comm hook, it frees nothing (the reducer is
 * in use until the hook returns) and says so in ddp_last_error_message().
 */
DDP_API void ddp_reducer_free(ddp_reducer *r);

DDP_EXTERN_C_END

#endif /* DDP_REDUCER_H */
