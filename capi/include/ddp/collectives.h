/**
 * @file collectives.h
 * @brief Lightning's distributed utilities: barrier, broadcast, sync_ddp
 *        (all_reduce), reduce, all_gather, gather_all_tensors (uneven) and
 *        reduce_boolean_decision.
 *
 * Every collective must be called by every rank of the group, in the same
 * order. Each has a blocking form and an `_async` form that returns a
 * ::ddp_work; ddp_work_wait then completes it. Blocking forms wait up to the
 * group's timeout.
 *
 * Errors (all forms): DDP_E_INVALID_ARGUMENT for NULL or freed handles, a
 * tensor on the wrong device, or a src/dst rank outside the group;
 * DDP_E_TIMEOUT when the operation ran past its timeout; DDP_E_PEER_FAILED
 * when a peer died; DDP_E_STATE when the group is broken by an earlier
 * failure; DDP_E_UNSUPPORTED for a dtype the backend cannot reduce.
 * On error, out-parameters are set to NULL and nothing is handed out.
 */
#ifndef DDP_COLLECTIVES_H
#define DDP_COLLECTIVES_H

#include "ddp/common.h"
#include "ddp/group.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** Reduction operators. */
typedef enum ddp_reduce_op {
  DDP_SUM = 0,
  /**
   * Lightning's sync_ddp with reduce_op="mean". On gloo: SUM, then division
   * by the group size. Floating tensors are divided in place; integer (and
   * bool) tensors get the true quotient truncated toward zero on the way
   * back (Lightning's `result.copy_(result / world_size)`), e.g. -7 / 2 = -3.
   * On nccl: the backend's native AVG.
   */
  DDP_MEAN = 1,
  DDP_MIN = 2,
  DDP_MAX = 3,
  DDP_PRODUCT = 4,
  DDP_REDUCE_OP_FORCE_INT = 0x7fffffff /* see DDP_DTYPE_FORCE_INT */
} ddp_reduce_op;

/**
 * An operation in flight. Threading: not for concurrent use. A work keeps its
 * group alive: the group handle may be freed before the work.
 */
typedef struct ddp_work ddp_work;

/**
 * Waits for @p work to complete.
 *
 * Composite operations (broadcast_bytes, all_gather_uneven) post their later
 * steps from here, so every rank must wait on its works in the order it
 * started them.
 *
 * @param timeout_ms  < 0: the group's timeout; otherwise milliseconds. Running
 *                    out of time returns DDP_E_TIMEOUT and breaks the group
 *                    (the collective cannot be resumed consistently).
 * @return DDP_OK (also when already waited), or the collective's error.
 */
DDP_API ddp_status ddp_work_wait(ddp_work *work, int64_t timeout_ms);

/**
 * @param[out] out 1 when the current communication step has finished (a
 *                 following ddp_work_wait will not block on it), else 0.
 */
DDP_API ddp_status ddp_work_is_completed(ddp_work *work, int *out);

/** @return the number of result tensors of a finished work (all_gather: 1, all_gather_uneven: world size). */
DDP_API size_t ddp_work_result_count(const ddp_work *work);

/**
 * @param[out] out new reference to result tensor @p index of a waited work;
 *                 NULL on error (DDP_E_STATE when not yet waited).
 */
DDP_API ddp_status ddp_work_result_tensor(ddp_work *work, size_t index, ddp_tensor **out);

/** @param[out] out new reference to the bytes of a waited broadcast_bytes work. */
DDP_API ddp_status ddp_work_result_buffer(ddp_work *work, ddp_buffer **out);

/** @param[out] out the decision of a waited reduce_boolean_decision work (0/1). */
DDP_API ddp_status ddp_work_result_decision(ddp_work *work, int *out);

/**
 * Frees @p work; NULL is accepted. A work freed unwaited leaves its tensors
 * to the backend until it finishes, and the free does not wait, except for
 * a collective on caller memory (ddp_tensor_from_blob) that the shm backend
 * performs in place: the free waits for it to end (it ends within the
 * group's timeout, at once once the group is broken; past that the free
 * breaks the group), so that the memory is not touched after the free.
 * Elsewhere the backend works on libddp's copy of such memory, and the free
 * drops its result.
 */
DDP_API void ddp_work_free(ddp_work *work);

/** Blocks until every rank reached the barrier. */
DDP_API ddp_status ddp_barrier(ddp_group *g);
/** @param[out] out new reference. */
DDP_API ddp_status ddp_barrier_async(ddp_group *g, ddp_work **out);

/**
 * Copies rank @p src's tensor into @p t on every rank (same shape and dtype everywhere).
 *
 * On the shm backend, @p src returns from a broadcast of at most 256 bytes
 * once its data is written, without waiting for the others (as an MPI
 * eager send). Where the other ranks made another call, they get
 * DDP_E_INVALID_ARGUMENT at once and @p src at its next collective, which
 * then fails on every rank and combines nothing.
 */
DDP_API ddp_status ddp_broadcast(ddp_group *g, ddp_tensor *t, int src);
/** @param[out] out new reference. */
DDP_API ddp_status ddp_broadcast_async(ddp_group *g, ddp_tensor *t, int src, ddp_work **out);

/**
 * Lightning's broadcast(obj), as bytes and never pickle: the length first,
 * then the payload.
 *
 * @param data  read on @p src only (copied before return); ignored elsewhere.
 * @param len   read on @p src only.
 * @param[out] out new reference holding src's bytes, on every rank (also src).
 * @return DDP_OK; where src cannot send (@p len above INT64_MAX:
 *         DDP_E_INVALID_ARGUMENT; no memory for its copy: DDP_E_NOMEM), that
 *         status on every rank at once, the peers' messages naming src, and
 *         the group stays usable. Where a peer has no memory for more than
 *         1 MiB that src sends, DDP_E_NOMEM on every rank at once, naming
 *         that peer (the ranks agree on it before the payload moves, one
 *         8-byte all-reduce more); a peer without memory for 1 MiB or less
 *         fails alone, and the others wait for it until their timeout.
 */
DDP_API ddp_status ddp_broadcast_bytes(ddp_group *g, const void *data, size_t len, int src,
                                       ddp_buffer **out);
/** @param[out] out new reference; the bytes come from ddp_work_result_buffer. */
DDP_API ddp_status ddp_broadcast_bytes_async(ddp_group *g, const void *data, size_t len, int src,
                                             ddp_work **out);

/** Reduces @p t in place across the group (see ::ddp_reduce_op for MEAN). */
DDP_API ddp_status ddp_all_reduce(ddp_group *g, ddp_tensor *t, ddp_reduce_op op);
/** @param[out] out new reference. */
DDP_API ddp_status ddp_all_reduce_async(ddp_group *g, ddp_tensor *t, ddp_reduce_op op,
                                        ddp_work **out);

/** Reduces @p t into rank @p dst's @p t; other ranks' tensors are unspecified afterwards. */
DDP_API ddp_status ddp_reduce(ddp_group *g, ddp_tensor *t, int dst, ddp_reduce_op op);
/** @param[out] out new reference. */
DDP_API ddp_status ddp_reduce_async(ddp_group *g, ddp_tensor *t, int dst, ddp_reduce_op op,
                                    ddp_work **out);

/**
 * Gathers every rank's @p in (same shape everywhere) stacked along a new
 * first dimension: shape (world, ...in).
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_all_gather(ddp_group *g, const ddp_tensor *in, ddp_tensor **out);
/** @param[out] out new reference; the tensor comes from ddp_work_result_tensor(work, 0). */
DDP_API ddp_status ddp_all_gather_async(ddp_group *g, const ddp_tensor *in, ddp_work **out);

/**
 * PyTorch's all_gather_into_tensor: every rank's @p in written into the
 * caller's @p out, rank r's at element r * numel(in). Nothing is allocated,
 * so a loop gathering the same sizes reuses one @p out.
 *
 * @param out  contiguous, @p in's dtype and device, world size x numel(in)
 *             elements in any shape (world x in's shape, or one dimension).
 *             @p in may be this rank's own part of @p out (an in-place
 *             gather); any other overlap is DDP_E_INVALID_ARGUMENT.
 */
DDP_API ddp_status ddp_all_gather_into_tensor(ddp_group *g, const ddp_tensor *in, ddp_tensor *out);
/**
 * @p out is written until the work is waited for; ddp_work_result_tensor(work, 0) is @p out.
 * @param[out] work new reference.
 */
DDP_API ddp_status ddp_all_gather_into_tensor_async(ddp_group *g, const ddp_tensor *in, ddp_tensor *out,
                                                    ddp_work **work);

/**
 * Lightning's gather_all_tensors: every rank's @p in, where sizes may differ
 * per rank but the ndim (and dtype) may not. Tensors are padded to the
 * per-dimension maximum, gathered and trimmed back. Scalars work too.
 *
 * @param[out] out caller's array of ddp_group_size(g) pointers; entry r
 *                 receives a new reference to rank r's tensor. All NULL on error.
 */
DDP_API ddp_status ddp_all_gather_uneven(ddp_group *g, const ddp_tensor *in, ddp_tensor **out);
/** @param[out] out new reference; results from ddp_work_result_tensor(work, r). */
DDP_API ddp_status ddp_all_gather_uneven_async(ddp_group *g, const ddp_tensor *in, ddp_work **out);

/**
 * Lightning's reduce_boolean_decision.
 * @param decision  this rank's vote (non-zero: yes).
 * @param all       non-zero: *out is 1 when every rank voted yes; zero: when any did.
 * @param[out] out  the decision, 0 or 1.
 */
DDP_API ddp_status ddp_reduce_boolean_decision(ddp_group *g, int decision, int all, int *out);
/** @param[out] out new reference; the result from ddp_work_result_decision. */
DDP_API ddp_status ddp_reduce_boolean_decision_async(ddp_group *g, int decision, int all,
                                                     ddp_work **out);

DDP_EXTERN_C_END

#endif /* DDP_COLLECTIVES_H */
