// The losses Lightning scripts use most, with torch.nn.functional's
// arguments: each is ATen's own kernel (so the value and its gradient are
// PyTorch's); what is here is the arguments' checks, named, before ATen
// sees them, and KL divergence's 'batchmean', which F.kl_div computes
// outside ATen.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddp::core {

struct LossSpec {
  enum class Kind { Mse, CrossEntropy, BceWithLogits, L1, SmoothL1, Huber, Nll, KlDiv } kind = Kind::Mse;
  // torch's reduction=; BatchMean is KL divergence's only.
  enum class Reduction { Mean, Sum, None, BatchMean } reduction = Reduction::Mean;
  at::Tensor weight;           // CrossEntropy, Nll: per class; BceWithLogits: broadcast over the input
  int64_t ignore_index = -100; // CrossEntropy, Nll (class-index targets)
  double label_smoothing = 0;  // CrossEntropy, in [0, 1]
  at::Tensor pos_weight;       // BceWithLogits: per class
  double beta = 1.0;           // SmoothL1, >= 0
  double delta = 1.0;          // Huber, > 0
  bool log_target = false;     // KlDiv
};

const char* loss_name(LossSpec::Kind kind);

// The loss of `input` against `target` (moved to input's device). Status::
// InvalidArgument naming the loss and what is wrong (shapes, a target dtype,
// an argument out of range).
at::Tensor compute_loss(const LossSpec& spec, const at::Tensor& input, const at::Tensor& target);

}  // namespace ddp::core
