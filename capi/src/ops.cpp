// Tensor arithmetic and autograd: argument checks, then core/tensor/tensor_math.
#include "ddp/ops.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "handles.h"
#include "tensor/tensor_math.h"

using namespace ddp::capi;

namespace {

ddp::core::BinaryOp binary_op(ddp_binary_op op) {
  if (op < DDP_OP_ADD || op > DDP_OP_MINIMUM)
    fail(DDP_E_INVALID_ARGUMENT, "tensor binary operator " + std::to_string(static_cast<int>(op)) + " is unknown");
  return static_cast<ddp::core::BinaryOp>(op);
}

ddp::core::UnaryOp unary_op(ddp_unary_op op) {
  if (op < DDP_OP_NEG || op > DDP_OP_COS)
    fail(DDP_E_INVALID_ARGUMENT, "tensor unary operator " + std::to_string(static_cast<int>(op)) + " is unknown");
  return static_cast<ddp::core::UnaryOp>(op);
}

// Every operator: out checked and cleared, then the result handed out.
template <typename F>
ddp_status op_call(ddp_tensor** out, const char* fn, F&& compute) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(compute())); });
}

std::vector<int64_t> dims_of(const int64_t* dims, size_t ndims, const char* fn) {
  if (ndims > 0 && !dims) fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": dims is NULL with ndims > 0");
  return std::vector<int64_t>(dims, dims + ndims);
}

}  // namespace

static_assert(static_cast<int>(ddp::core::BinaryOp::Minimum) == DDP_OP_MINIMUM, "binary operator values");
static_assert(static_cast<int>(ddp::core::UnaryOp::Cos) == DDP_OP_COS, "unary operator values");

extern "C" {

ddp_status ddp_tensor_binary(ddp_binary_op op, const ddp_tensor* a, const ddp_tensor* b, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_binary",
                 [&] { return ddp::core::binary(binary_op(op), require(a, "a")->t, require(b, "b")->t); });
}

ddp_status ddp_tensor_binary_scalar(ddp_binary_op op, const ddp_tensor* a, double scalar, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_binary_scalar",
                 [&] { return ddp::core::binary_scalar(binary_op(op), require(a, "a")->t, scalar); });
}

ddp_status ddp_tensor_unary(ddp_unary_op op, const ddp_tensor* a, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_unary", [&] { return ddp::core::unary(unary_op(op), require(a, "a")->t); });
}

ddp_status ddp_tensor_softmax(const ddp_tensor* a, int64_t dim, int log, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_softmax", [&] { return ddp::core::softmax(require(a, "a")->t, dim, log != 0); });
}

ddp_status ddp_tensor_sum(const ddp_tensor* a, const int64_t* dims, size_t ndims, int keepdim, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_sum", [&] {
    return ddp::core::reduce(ddp::core::ReductionOp::Sum, require(a, "a")->t, dims_of(dims, ndims, "ddp_tensor_sum"),
                             keepdim != 0);
  });
}

ddp_status ddp_tensor_mean(const ddp_tensor* a, const int64_t* dims, size_t ndims, int keepdim, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_mean", [&] {
    return ddp::core::reduce(ddp::core::ReductionOp::Mean, require(a, "a")->t, dims_of(dims, ndims, "ddp_tensor_mean"),
                             keepdim != 0);
  });
}

ddp_status ddp_tensor_item(const ddp_tensor* t, double* out) {
  if (!out) return invalid("ddp_tensor_item: out is NULL");
  return fence([&] { *out = ddp::core::item(require(t, "tensor")->t); });
}

ddp_status ddp_tensor_clone(const ddp_tensor* t, ddp_tensor** out) {
  return op_call(out, "ddp_tensor_clone", [&] { return require(t, "tensor")->t.detach().clone(at::MemoryFormat::Contiguous); });
}

ddp_status ddp_tensor_set_requires_grad(ddp_tensor* t, int on) {
  return fence([&] {
    at::Tensor& x = require(t, "tensor")->t;
    if (on && !at::isFloatingType(x.scalar_type()) && !at::isComplexType(x.scalar_type()))
      fail(DDP_E_INVALID_ARGUMENT, "ddp_tensor_set_requires_grad: only a floating-point tensor can require grad, not " +
                                       std::string(c10::toString(x.scalar_type())));
    if (!x.is_leaf())
      fail(DDP_E_INVALID_ARGUMENT, "ddp_tensor_set_requires_grad: the tensor is the result of an operator, not a leaf");
    x.requires_grad_(on != 0);
  });
}

int ddp_tensor_requires_grad(const ddp_tensor* t) {
  auto* h = live(t);
  return h && h->t.requires_grad() ? 1 : 0;
}

ddp_status ddp_tensor_grad(const ddp_tensor* t, ddp_tensor** out) {
  if (!out) return invalid("ddp_tensor_grad: out is NULL");
  *out = nullptr;
  return fence([&] {
    const at::Tensor& g = require(t, "tensor")->t.grad();
    if (g.defined()) hand_out(out, wrap_tensor(g.contiguous()));
  });
}

ddp_status ddp_tensor_backward(const ddp_tensor* t) {
  return fence([&] {
    const at::Tensor& x = require(t, "tensor")->t;
    if (!x.requires_grad())
      fail(DDP_E_INVALID_ARGUMENT, "ddp_tensor_backward: the tensor does not require grad (made under no grad, or "
                                   "from tensors that need none)");
    if (x.numel() != 1)
      fail(DDP_E_INVALID_ARGUMENT, "ddp_tensor_backward: the tensor has " + std::to_string(x.numel()) +
                                       " elements; backward starts from one (a loss)");
    torch::autograd::backward({x});
  });
}

ddp_status ddp_grad_set_enabled(int enabled, int* previous) {
  if (previous) *previous = at::GradMode::is_enabled() ? 1 : 0;
  at::GradMode::set_enabled(enabled != 0);
  return DDP_OK;
}

int ddp_grad_is_enabled(void) { return at::GradMode::is_enabled() ? 1 : 0; }

}  // extern "C"
