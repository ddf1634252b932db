/**
 * @file comm_hook.h
 * @brief Communication hooks: how a reducer's buckets are reduced
 *        (PyTorch's DDP comm hooks, which Lightning registers).
 *
 * A hook handle is immutable configuration; a reducer that is given one keeps
 * its own reference (and its own state, for stateful hooks).
 * Threading: may be shared between threads.
 */
#ifndef DDP_COMM_HOOK_H
#define DDP_COMM_HOOK_H

#include "ddp/common.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

typedef struct ddp_comm_hook ddp_comm_hook;

/**
 * PyTorch's allreduce_hook: divides the bucket by the group size (or, with
 * join, by the ranks still training), then all-reduces with SUM.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_comm_hook_allreduce(ddp_comm_hook **out);

/**
 * PyTorch's fp16_compress_hook: the bucket is cast to float16, divided by the
 * group size, all-reduced (SUM) and cast back into the bucket.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_comm_hook_fp16_compress(ddp_comm_hook **out);

/** PyTorch's bf16_compress_hook: as ddp_comm_hook_fp16_compress with bfloat16. */
DDP_API ddp_status ddp_comm_hook_bf16_compress(ddp_comm_hook **out);

/**
 * PyTorch's fp16_compress_wrapper: @p inner runs on a float16 copy of the
 * bucket and its result is cast back into the bucket.
 * @param[out] out new reference.
 * @param inner    borrowed; the wrapper keeps its own reference.
 */
DDP_API ddp_status ddp_comm_hook_wrap_fp16(ddp_comm_hook **out, const ddp_comm_hook *inner);

/** PyTorch's bf16_compress_wrapper: as ddp_comm_hook_wrap_fp16 with bfloat16. */
DDP_API ddp_status ddp_comm_hook_wrap_bf16(ddp_comm_hook **out, const ddp_comm_hook *inner);

/**
 * PyTorch's noop_hook: buckets are left as they are (local gradients, no
 * communication); for measuring everything but communication.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_comm_hook_noop(ddp_comm_hook **out);

struct ddp_group;

/**
 * PyTorch's post_localSGD_hook: a global all-reduce (divide by the group
 * size, SUM) for the first @p start_localsgd_iter steps, then an all-reduce
 * within @p subgroup only, or no gradient communication at all when
 * @p post_local_gradient_allreduce is 0. Pair it with a model averager
 * (ddp_model_averager_*), which averages the parameters globally every
 * period steps after the optimizer step.
 *
 * @param[out] out   new reference.
 * @param subgroup   borrowed, must outlive the reducers using the hook; NULL:
 *                   one subgroup per node, created collectively on first use.
 */
DDP_API ddp_status ddp_comm_hook_post_localsgd(ddp_comm_hook **out, struct ddp_group *subgroup,
                                               int64_t start_localsgd_iter, int post_local_gradient_allreduce);

/** What a custom hook is given: one bucket, valid during the call only. */
typedef struct ddp_comm_bucket {
  ddp_tensor *buffer;             /**< borrowed: the flat bucket; reduce it in place */
  size_t index;                   /**< bucket index (buckets run in index order) */
  int is_last;                    /**< 1 for the last bucket of the step */
  int divisor;                    /**< divide by this to average (group size, or ranks not joined) */
  size_t num_params;              /**< gradients in the bucket */
  const size_t *param_indices;    /**< their parameter indices */
  const int64_t *offsets;         /**< element offset of each in buffer */
  const size_t *ndims;            /**< number of dimensions of each */
  const int64_t *const *shapes;   /**< shapes[k]: ndims[k] sizes */
} ddp_comm_bucket;

/**
 * A hook written in C. It runs when a bucket is ready, on the thread that
 * completed it, and must leave the reduced bucket in bucket->buffer before
 * it returns (e.g. with ddp_all_reduce on @p group). Returning a non-OK
 * status fails the step on every rank with that status (the failure is
 * published to the other ranks, whose waits stop instead of hanging), and
 * the group is unusable afterwards.
 */
typedef ddp_status (*ddp_comm_hook_fn)(struct ddp_group *group, const ddp_comm_bucket *bucket, void *user_data);

/**
 * @param[out] out  new reference.
 * @param fn        the hook.
 * @param user_data passed to every call (borrowed; must outlive the reducers using the hook).
 */
DDP_API ddp_status ddp_comm_hook_custom(ddp_comm_hook **out, ddp_comm_hook_fn fn, void *user_data);

/** Frees @p hook; NULL is accepted. Reducers using it keep working. */
DDP_API void ddp_comm_hook_free(ddp_comm_hook *hook);

DDP_EXTERN_C_END

#endif /* DDP_COMM_HOOK_H */
