// torch.optim's parameter groups chosen by name, as scripts build them
// (`[{"params": decay}, {"params": no_decay, "weight_decay": 0.0}]` from
// model.named_parameters()): each group lists shell-style patterns of
// parameter names ("*.bias", "norm*.*", "fc1.weight"), and a parameter goes
// to the first group with a pattern that matches it; a group without
// patterns takes every parameter no pattern group took (the rest), at its
// place in the list. Within a group the parameters keep the module's order.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"

namespace ddp::core {

struct ParamGroupSelector {
  std::vector<std::string> patterns;  // empty: the rest
  // Hyper-parameters of this group; unset: the optimizer's.
  std::optional<double> lr;
  std::optional<double> weight_decay;
  std::optional<double> momentum;  // SGD's
};

struct ParamGroup {
  std::vector<at::Tensor> params;
  std::vector<std::string> names;
  std::optional<double> lr;
  std::optional<double> weight_decay;
  std::optional<double> momentum;
};

// The groups of `named_params` (the module's parameters in order).
// Status::InvalidArgument naming a pattern that matches no parameter, a
// group left with none (an earlier group took them all), a second rest
// group, or a parameter no group takes when there is no rest group.
std::vector<ParamGroup> select_param_groups(const std::vector<NamedTensor>& named_params,
                                            const std::vector<ParamGroupSelector>& selectors);

}  // namespace ddp::core
