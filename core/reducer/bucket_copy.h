// The reducer's copies between gradients and their bucket views. A step
// copies every gradient in and out once; for a small model's gradients
// ATen's per-call dispatch costs more than the copy, so contiguous float32
// and float64 CPU tensors take a plain loop whose results are bitwise
// ATen's (one multiply per element by the same rounded factor); anything
// else goes to ATen.
#pragma once

#include <ATen/core/Tensor.h>

namespace ddp::core {

// 1/world as PyTorch's reducer passes it to mul: a wrapped (weakly typed)
// double, rounded to the gradient's dtype by the multiply.
at::Tensor reciprocal_world(int world);

// dst = src * (1/world), as at::mul_out(dst, src, reciprocal_world(world)).
void copy_divided(const at::Tensor& dst, const at::Tensor& src, int world);

// dst = src.
void copy_plain(const at::Tensor& dst, const at::Tensor& src);

// What an in-place ATen op does besides writing: autograd sees the change
// (for a tensor written through its raw pointer).
void mark_written(const at::Tensor& dst);

}  // namespace ddp::core
