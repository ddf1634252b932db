// LibTorch's own optimizers (torch::optim SGD, Adam, AdamW) over a module's
// parameters, with their per-parameter state as named tensors for
// checkpoints. Nothing of the update rules is written here.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "checkpoint/checkpoint_file.h"

namespace ddp::core {

struct OptimizerSpec {
  enum class Kind { Sgd, Adam, AdamW } kind = Kind::Sgd;
  double lr = 0.01;
  // SGD
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;
  // Adam, AdamW
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  bool amsgrad = false;
  // All (AdamW: decoupled, PyTorch's default 0.01)
  double weight_decay = 0;
};

class Optimizer {
 public:
  // Checks the hyper-parameters (Status::InvalidArgument naming the bad one).
  static std::unique_ptr<Optimizer> make(const OptimizerSpec& spec, std::vector<at::Tensor> params);
  virtual ~Optimizer() = default;

  // PyTorch 2's default: gradients set to None, not zeroed.
  virtual void zero_grad() = 0;
  virtual void step() = 0;
  // The parameters it updates (what gradient clipping and the grad scaler
  // work on), in the order it was given them.
  virtual const std::vector<at::Tensor>& parameters() const = 0;
  // "<param index>.<buffer>" -> tensor, for every parameter with state.
  virtual std::vector<NamedTensor> state() const = 0;
  // Status::IO naming the first entry that does not fit the parameters.
  virtual void check_state(const std::vector<NamedTensor>& saved) const = 0;
  // Replaces the state with `saved`, after check_state: nothing changes
  // unless every entry is good.
  virtual void load_state(const std::vector<NamedTensor>& saved) = 0;
};

}  // namespace ddp::core
