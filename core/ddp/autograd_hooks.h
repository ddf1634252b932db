// Marking LibTorch parameters ready from autograd: a post hook on each
// parameter's gradient accumulator calls Reducer::mark_ready the moment its
// gradient is final, and the first hook of a backward queues
// Reducer::finish as the engine's final callback, so a plain
// loss.backward() synchronises the gradients with no call from the user.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace ddp {

class Reducer;

class AutogradHooks {
 public:
  virtual ~AutogradHooks() = default;
};

std::unique_ptr<AutogradHooks> make_autograd_hooks(Reducer& reducer, const std::vector<at::Tensor>& params);

}  // namespace ddp
