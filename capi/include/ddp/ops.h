/**
 * @file ops.h
 * @brief Tensor arithmetic and autograd: what a loss written outside Python
 *        needs (`ce + 0.1 * mse`, a masked mean, a penalty), evaluation
 *        without a graph, and gradients read back.
 *
 * Each operator is ATen's own (the values and gradients are PyTorch's) and
 * keeps the autograd graph: its result, handed to ddp_strategy_backward,
 * trains. Results are new references to contiguous tensors on the first
 * input's device; a second tensor on another device is moved there.
 * Broadcasting and type promotion are PyTorch's. A result the host has no
 * memory for is DDP_E_NOMEM (say, shapes that broadcast to terabytes).
 *
 * Threading: grad mode is per thread, as torch.set_grad_enabled.
 */
#ifndef DDP_OPS_H
#define DDP_OPS_H

#include "ddp/common.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** Element-wise operators of two operands (torch.add, sub, mul, div, pow, maximum, minimum). */
typedef enum ddp_binary_op {
  DDP_OP_ADD = 0,
  DDP_OP_SUB = 1,
  DDP_OP_MUL = 2,
  DDP_OP_DIV = 3,     /**< true division */
  DDP_OP_POW = 4,
  DDP_OP_MAXIMUM = 5, /**< with a scalar: torch.clamp(min=) */
  DDP_OP_MINIMUM = 6, /**< with a scalar: torch.clamp(max=) */
  DDP_BINARY_OP_FORCE_INT = 0x7fffffff
} ddp_binary_op;

/** Element-wise functions of one operand. */
typedef enum ddp_unary_op {
  DDP_OP_NEG = 0,
  DDP_OP_EXP = 1,
  DDP_OP_LOG = 2,
  DDP_OP_SQRT = 3,
  DDP_OP_ABS = 4,
  DDP_OP_SQUARE = 5,
  DDP_OP_RELU = 6,
  DDP_OP_SIGMOID = 7,
  DDP_OP_TANH = 8,
  DDP_OP_LOG1P = 9,
  DDP_OP_SIN = 10,
  DDP_OP_COS = 11,
  DDP_UNARY_OP_FORCE_INT = 0x7fffffff
} ddp_unary_op;

/**
 * @p a (op) @p b, element-wise with broadcasting.
 * @param[out] out new reference.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming the operator and both shapes
 *         when they do not broadcast, or an unknown operator; DDP_E_NOMEM
 *         when the result cannot be allocated.
 */
DDP_API ddp_status ddp_tensor_binary(ddp_binary_op op, const ddp_tensor *a, const ddp_tensor *b, ddp_tensor **out);

/** @p a (op) @p scalar (`a * 0.1`, `a ** 2`). @param[out] out new reference. */
DDP_API ddp_status ddp_tensor_binary_scalar(ddp_binary_op op, const ddp_tensor *a, double scalar, ddp_tensor **out);

/** op(@p a), element-wise. @param[out] out new reference. */
DDP_API ddp_status ddp_tensor_unary(ddp_unary_op op, const ddp_tensor *a, ddp_tensor **out);

/**
 * softmax (@p log 0) or log_softmax (@p log 1) of @p a along @p dim
 * (negative: from the end). @param[out] out new reference.
 */
DDP_API ddp_status ddp_tensor_softmax(const ddp_tensor *a, int64_t dim, int log, ddp_tensor **out);

/**
 * The sum over @p dims (all dimensions when @p ndims is 0: a 0-d tensor);
 * @p keepdim keeps them with size 1. @p dims may be NULL when @p ndims is 0.
 * @param[out] out new reference.
 * @return DDP_E_INVALID_ARGUMENT naming a dimension outside the tensor.
 */
DDP_API ddp_status ddp_tensor_sum(const ddp_tensor *a, const int64_t *dims, size_t ndims, int keepdim, ddp_tensor **out);

/** The mean, as ddp_tensor_sum; DDP_E_INVALID_ARGUMENT for an integer tensor (as torch). */
DDP_API ddp_status ddp_tensor_mean(const ddp_tensor *a, const int64_t *dims, size_t ndims, int keepdim, ddp_tensor **out);

/**
 * The value of a one-element tensor (a loss) as a double (torch's item()).
 * @return DDP_E_INVALID_ARGUMENT for a tensor of another size.
 */
DDP_API ddp_status ddp_tensor_item(const ddp_tensor *t, double *out);

/** A copy of @p t in new memory, outside the autograd graph (clone().detach()). @param[out] out new reference. */
DDP_API ddp_status ddp_tensor_clone(const ddp_tensor *t, ddp_tensor **out);

/**
 * Marks a floating-point tensor as a leaf whose gradient autograd computes
 * (requires_grad_), e.g. an input whose gradient the caller wants.
 * @return DDP_E_INVALID_ARGUMENT for an integer tensor, or a tensor that is
 *         not a leaf (the result of an operator).
 */
DDP_API ddp_status ddp_tensor_set_requires_grad(ddp_tensor *t, int on);

/** @return 1 when @p t is in an autograd graph (requires grad), else 0 (also for an invalid handle). */
DDP_API int ddp_tensor_requires_grad(const ddp_tensor *t);

/**
 * The gradient autograd accumulated into leaf @p t (made with
 * ddp_tensor_set_requires_grad), sharing its memory. A module parameter's
 * gradient: ddp_module_grad.
 * @param[out] out new reference, or NULL when there is none yet.
 */
DDP_API ddp_status ddp_tensor_grad(const ddp_tensor *t, ddp_tensor **out);

/**
 * Autograd's backward from a one-element @p t on this process only
 * (loss.backward() without DDP: evaluation, a model outside a strategy).
 * Training under a strategy uses ddp_strategy_backward, which synchronises.
 * @return DDP_E_INVALID_ARGUMENT when @p t does not require grad or has more than one element.
 */
DDP_API ddp_status ddp_tensor_backward(const ddp_tensor *t);

/**
 * torch.set_grad_enabled for the calling thread: with 0, operators and
 * forwards build no autograd graph (torch.no_grad: evaluation, prediction),
 * and a strategy's forward is not a collective (no buffer broadcast).
 * @param[out] previous may be NULL: the mode before the call, to restore it.
 */
DDP_API ddp_status ddp_grad_set_enabled(int enabled, int *previous);

/** @return 1 when the calling thread records autograd graphs (the default), else 0. */
DDP_API int ddp_grad_is_enabled(void);

DDP_EXTERN_C_END

#endif /* DDP_OPS_H */
