// torch.nn.SyncBatchNorm's training step on a Group, on any device (PyTorch's
// is CUDA only): each rank's per-channel count, mean and sum of squared
// deviations are gathered and combined (Chan's formula, in float64), so the
// batch is normalised with the statistics of the global batch, whatever each
// rank holds (uneven batches, a rank with no rows). The running statistics
// move with the unbiased global variance. The backward all-reduces the two
// per-channel sums SyncBatchNorm reduces (of the output gradient, and of it
// times the centred input); the weight and bias gradients stay local, for
// DDP to average as it averages every other gradient.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "comm/group.h"

namespace ddp::core {

// Training mode only (eval is plain batch_norm with the running statistics,
// no collective). Collective in forward and in backward: every rank calls it
// for the same layers in the same order. weight, bias, running_mean and
// running_var may be undefined (affine=False, track_running_stats=False).
// Status::InvalidArgument when the whole group holds at most one value per
// channel, as BatchNorm refuses.
at::Tensor sync_batch_norm(const std::shared_ptr<Group>& g, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                           double momentum, double eps);

}  // namespace ddp::core
