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

DDP_EXTERN_C_BEGIN

typedef struct ddp_comm_hook ddp_comm_hook;

/**
 * PyTorch's allreduce_hook: divides the bucket by the group size (or, with
 * join, by the ranks still training), then all-reduces with SUM.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_comm_hook_allreduce(ddp_comm_hook **out);

/** Frees @p hook; NULL is accepted. Reducers using it keep working. */
DDP_API void ddp_comm_hook_free(ddp_comm_hook *hook);

DDP_EXTERN_C_END

#endif /* DDP_COMM_HOOK_H */
