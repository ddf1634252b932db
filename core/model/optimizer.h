// LibTorch's own optimizers (torch::optim SGD, Adam, AdamW) over a module's
// parameters, with their per-parameter state as named tensors for
// checkpoints. Nothing of the update rules is written here.
#pragma once

#include <ATen/core/ivalue.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "model/param_groups.h"

namespace torch::optim {
class Optimizer;
}

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
  // torch.optim's parameter groups: `spec` is the defaults, each group's
  // own values replace them (lr, weight_decay, SGD's momentum).
  static std::unique_ptr<Optimizer> make(const OptimizerSpec& spec, const std::vector<ParamGroup>& groups);
  // A torch::optim optimizer the caller made and keeps alive (C++ programs,
  // and JavaCPP's or tch's LibTorch when it is this library's): its kind
  // (SGD, Adam, AdamW) found from its dynamic type, its groups and state
  // its own. Stepped, scheduled and checkpointed exactly as one made here,
  // since one made here is the same torch::optim object. spec() is its first
  // group's. Status::InvalidArgument for another kind, naming it.
  static std::unique_ptr<Optimizer> borrow(torch::optim::Optimizer& opt);
  virtual ~Optimizer() = default;

  // PyTorch 2's default: gradients set to None, not zeroed.
  virtual void zero_grad() = 0;
  virtual void step() = 0;
  // The parameters it updates (what gradient clipping and the grad scaler
  // work on), in the order it was given them.
  virtual const std::vector<at::Tensor>& parameters() const = 0;
  // The hyper-parameters it was made with (the learning rate as made).
  virtual const OptimizerSpec& spec() const = 0;
  virtual size_t num_groups() const = 0;
  // The learning rate in effect (what a scheduler sets): the first group's;
  // set_lr sets every group's.
  virtual double lr() const = 0;
  virtual double group_lr(size_t group) const = 0;
  virtual void set_lr(double lr) = 0;
  // Status::InvalidArgument for a group past num_groups().
  virtual void set_group_lr(size_t group, double lr) = 0;
  // SGD's momentum, or Adam's beta1 (what OneCycleLR cycles): the first
  // group's; set_momentum sets every group's.
  virtual double momentum() const = 0;
  virtual void set_momentum(double m) = 0;
  virtual void set_group_momentum(size_t group, double m) = 0;
  // What schedulers keep in PyTorch's param_group beside the
  // hyper-parameters ('initial_lr', OneCycleLR's 'max_lr', 'min_lr',
  // 'max_momentum', 'base_momentum'): saved and restored with the state.
  virtual std::map<std::string, double>& group_extras(size_t group = 0) = 0;

  // torch.optim's state_dict() layout: {"state": {index: {buffer: tensor}},
  // "param_groups": [{hyper-parameters..., "params": [indices]}]}, which
  // Python's optimizer.load_state_dict and Lightning's checkpoints hold.
  virtual c10::IValue state_dict() const = 0;
  // Status::IO naming the first entry of `saved` (the layout above, from
  // PyTorch, Lightning or libddp) that does not fit this optimizer: another
  // kind's buffers, a parameter it does not have, a shape or dtype.
  virtual void check_state_dict(const c10::IValue& saved) const = 0;
  // Replaces the state and the group's hyper-parameters (the learning rate
  // too, as PyTorch's load_state_dict) with `saved`, after check_state_dict:
  // nothing changes unless every entry is good. The values are copied into
  // the state's existing buffers where they fit (no second state in
  // memory), else into new ones; `saved` is never kept.
  virtual void load_state_dict(const c10::IValue& saved) = 0;
};

}  // namespace ddp::core
