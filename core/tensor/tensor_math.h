// The tensor arithmetic a loss written outside Python needs (l1 + 0.1 * l2,
// a mean over a mask, a norm penalty): thin calls of ATen's own operators,
// so every result keeps its autograd graph and equals PyTorch's. What is
// here is the mapping from libddp's operator names and the checks that
// turn ATen's refusals into messages naming the operator.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace ddp::core {

enum class BinaryOp { Add, Sub, Mul, Div, Pow, Maximum, Minimum };
enum class UnaryOp { Neg, Exp, Log, Sqrt, Abs, Square, Relu, Sigmoid, Tanh, Log1p, Sin, Cos };
enum class ReductionOp { Sum, Mean };

const char* op_name(BinaryOp op);
const char* op_name(UnaryOp op);

// a (op) b with PyTorch's broadcasting and type promotion; b is moved to a's
// device. Status::InvalidArgument naming the op and both shapes when they
// do not broadcast.
at::Tensor binary(BinaryOp op, const at::Tensor& a, const at::Tensor& b);
// a (op) scalar (torch's `a + 2.0`, `a ** 2`).
at::Tensor binary_scalar(BinaryOp op, const at::Tensor& a, double scalar);
at::Tensor unary(UnaryOp op, const at::Tensor& a);
// softmax or log_softmax along `dim` (negative counts from the end).
at::Tensor softmax(const at::Tensor& a, int64_t dim, bool log);
// Sum or mean over `dims` (all of them when empty), keeping them as size-1
// dimensions with keepdim. An integer tensor's mean is refused, as torch's.
at::Tensor reduce(ReductionOp op, const at::Tensor& a, const std::vector<int64_t>& dims, bool keepdim);
// The value of a one-element tensor as a double (torch's item()).
double item(const at::Tensor& a);

}  // namespace ddp::core
