// The reducer on LibTorch parameters, driven by autograd: a post hook on
// each parameter's gradient accumulator marks it ready the moment its
// gradient is final, and the first hook of a backward queues finish() as the
// engine's final callback, so a plain loss.backward() synchronises the
// gradients with no call from the user. The gradients are read from and
// written back to each parameter's .grad() (a GradientSource): the Reducer
// itself knows nothing of autograd.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "reducer/grad_reducer.h"

namespace ddp::core {

// `params`: leaf tensors that require grad. Not with gradient_as_bucket_view.
std::unique_ptr<Reducer> make_autograd_reducer(Group& group, std::vector<at::Tensor> params,
                                               const ReducerOptions& opts);

}  // namespace ddp::core
