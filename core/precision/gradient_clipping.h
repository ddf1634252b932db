// Gradient clipping as torch.nn.utils.clip_grad_norm_ / clip_grad_value_
// compute it (the foreach kernels, grouped by device and dtype, the same
// 1e-6 in the coefficient), so that a clipped step is PyTorch's bit for bit.
// Lightning's gradient_clip_val / gradient_clip_algorithm call these on the
// optimizer's parameters after the gradients were unscaled.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace ddp::core {

enum class ClipAlgorithm { Norm, Value };

// Status::InvalidArgument unless `value` is a positive finite number; `what`
// names the option in the message.
void check_clip_value(double value, const std::string& what);

// Scales the gradients so that their total 2-norm is at most `max_norm`;
// returns the total norm before clipping (inf or NaN when a gradient was not
// finite, as PyTorch's with error_if_nonfinite=False).
at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);
// Clamps every gradient element into [-clip_value, clip_value].
void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value);

}  // namespace ddp::core
