/**
 * @file comm_hook.h
 * @brief Communication hooks: how a reducer's buckets are reduced
 *        (PyTorch's DDP comm hooks, which Lightning registers).
 *
 * A reducer that is given a hook keeps its own reference to it. Stateful
 * hooks (PowerSGD, post-local SGD) keep their state, as PyTorch's hook state
 * objects do, in the handle: give each reducer its own. One reducer at a
 * time holds a stateful hook (or a wrapper of one), from
 * ddp_reducer_set_comm_hook (or a strategy's module setup) until that
 * reducer is freed or given another hook; another reducer is refused it
 * meanwhile with DDP_E_STATE, where PyTorch mixes both models' steps and
 * buckets in one state without a word.
 * Threading: may be shared between threads.
 */
#ifndef DDP_COMM_HOOK_H
#define DDP_COMM_HOOK_H

#include "ddp/common.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** A communication hook (PyTorch's DDP comm hooks): how a bucket of gradients is reduced; freed with ddp_comm_hook_free. */
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
 * bucket and its result is cast back into the bucket. @p inner may be any
 * hook, a custom C hook or another wrapper included.
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

/** The version of ::ddp_powersgd_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_POWERSGD_OPTIONS_VERSION 1

/**
 * PyTorch's PowerSGDState arguments, with its defaults. Initialise with
 * DDP_POWERSGD_OPTIONS_INIT or ddp_powersgd_options_init.
 */
typedef struct ddp_powersgd_options {
  unsigned int version;             /**< DDP_POWERSGD_OPTIONS_VERSION */
  int matrix_approximation_rank;    /**< 1: rank r of the P (n x r) and Q (m x r) factors */
  int64_t start_powersgd_iter;      /**< 1000: plain all-reduce for the steps before this one;
                                         must be > 1 when use_error_feedback or warm_start is on */
  double min_compression_rate;      /**< 2: compress an n x m gradient only if (n + m) * r * rate < n * m */
  int use_error_feedback;           /**< 1: add the last step's compression error to the next gradients */
  int warm_start;                   /**< 1: start each step's power iteration from the last Q */
  double orthogonalization_epsilon; /**< 0: added to column norms (avoids dividing by zero) */
  uint32_t random_seed;             /**< 0: seeds the initial Qs exactly as PyTorch's random_seed does */
  int batch_tensors_with_same_shape;/**< 0: 1 compresses same-shaped gradients of a bucket in one batch */
  int batched;                      /**< 0: 1 is PyTorch's batched_powerSGD_hook (the whole bucket as one square matrix) */
} ddp_powersgd_options;

/** An initialiser of ::ddp_powersgd_options with the defaults: `ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;` */
#define DDP_POWERSGD_OPTIONS_INIT {DDP_POWERSGD_OPTIONS_VERSION, 1, 1000, 2.0, 1, 1, 0.0, 0, 0, 0}

/** Fills @p opts with the defaults of @p version. */
DDP_API ddp_status ddp_powersgd_options_init(ddp_powersgd_options *opts, unsigned int version);

/**
 * PyTorch's powerSGD_hook (or batched_powerSGD_hook with opts->batched):
 * each gradient matrix M of a bucket is sent as the low-rank factors
 * P = M Q and Q = M^T P (two all-reduces), gradients that would not shrink
 * by min_compression_rate (vectors among them) are all-reduced as they are.
 * The result is the average, as with the allreduce hook. A step is counted
 * when its last bucket is reduced.
 *
 * @param[out] out new reference; it holds the hook's state.
 * @param opts     NULL for defaults. Invalid values give DDP_E_INVALID_ARGUMENT
 *                 naming the field.
 */
DDP_API ddp_status ddp_comm_hook_powersgd(ddp_comm_hook **out, const ddp_powersgd_options *opts);

/** Compression statistics (PowerSGDState.compression_stats()). */
typedef struct ddp_compression_stats {
  uint64_t numel_before; /**< elements of the compressed steps' gradients, summed */
  uint64_t numel_after;  /**< elements actually sent for them (P, Q and uncompressed gradients) */
  int64_t iteration;     /**< steps the hook has counted */
} ddp_compression_stats;

/**
 * Reads the statistics of a PowerSGD hook, or of an fp16/bf16 wrapper around
 * one. The compression rate is numel_before / numel_after (0 when nothing was
 * compressed yet). Other hooks give DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_comm_hook_compression_stats(const ddp_comm_hook *hook, ddp_compression_stats *out);

/**
 * PyTorch's post_localSGD_hook: a global all-reduce (divide by the group
 * size, SUM) for the first @p start_localsgd_iter steps, then an all-reduce
 * within @p subgroup only, or no gradient communication at all when
 * @p post_local_gradient_allreduce is 0. Pair it with a model averager
 * (ddp_model_averager_*), which averages the parameters globally every
 * period steps after the optimizer step.
 *
 * @param[out] out   new reference.
 * @param subgroup   borrowed; the hook keeps the subgroup alive, so the handle
 *                   may be freed first; NULL:
 *                   one subgroup per node, created collectively on first use.
 */
DDP_API ddp_status ddp_comm_hook_post_localsgd(ddp_comm_hook **out, struct ddp_group *subgroup,
                                               int64_t start_localsgd_iter, int post_local_gradient_allreduce);

/** What a custom hook is given: one bucket, valid during the call only. */
typedef struct ddp_comm_bucket {
  ddp_tensor *buffer;             /**< borrowed: the flat bucket; reduce it in place. Its dtype is the gradients', or float16/bfloat16 inside ddp_comm_hook_wrap_fp16/_bf16: check ddp_tensor_dtype */
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
 * it returns (e.g. with ddp_all_reduce on @p group). Returning an error
 * status fails the step on every rank with that status (the failure is
 * published to the other ranks, whose waits stop instead of hanging), and
 * the group is unusable afterwards; any other non-zero value does the same
 * as DDP_E_BACKEND, the message naming the value. The hook runs inside a
 * call on its reducer: a call back into that reducer from the hook
 * (mark_ready, finish, set_sync, set_comm_hook, join) is DDP_E_STATE, and
 * ddp_reducer_free does nothing there.
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
