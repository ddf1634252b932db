// The per-element passes of the synchronised batch norm, as plain loops for
// contiguous float32/float64 tensors on the CPU. On a small layer (a batch
// of 32 rows of 128 channels) ATen's kernels cost far more in dispatch and
// in the tiny per-channel tensors around them than in arithmetic: these
// loops take each pass in one call, with the per-channel numbers kept as
// C numbers. Every other tensor (CUDA, half types, strided) takes ATen's
// kernels in sync_batch_norm.cpp.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace ddp::core::bn_kernels {

// Whether the loops below take `x` (and a gradient like it).
bool applies(const at::Tensor& x);

// Per channel of x (N, C, ...): the mean and the sum of squared deviations
// from it (two passes, float64 accumulators). Both have C entries; an
// empty x gives zeros.
void moments(const at::Tensor& x, double* mean, double* m2);

// y = x * scale[c] + shift[c] per channel, in x's type.
at::Tensor scale_shift(const at::Tensor& x, const std::vector<double>& scale, const std::vector<double>& shift);

// Per channel: sum(dy) and sum(dy * (x - mean[c])), float64.
void grad_sums(const at::Tensor& dy, const at::Tensor& x, const std::vector<double>& mean, double* sum_dy,
               double* sum_dy_xmu);

// dx = (dy - mean_dy[c] - (x - mean[c]) * k[c]) * scale[c], in x's type.
at::Tensor grad_input(const at::Tensor& dy, const at::Tensor& x, const std::vector<double>& mean,
                      const std::vector<double>& mean_dy, const std::vector<double>& k,
                      const std::vector<double>& scale);

// Writes `values` into a contiguous CPU float32/float64 vector `t` in place
// (false, nothing written, for any other tensor).
bool write(const at::Tensor& t, const std::vector<double>& values);

}  // namespace ddp::core::bn_kernels
