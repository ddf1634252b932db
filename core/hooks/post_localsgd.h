// Post-local SGD (PyTorch's post_localSGD_hook) and the periodic model
// averager that goes with it (torch.distributed.algorithms.model_averaging).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "hooks/comm_hook.h"

namespace ddp::core {

// Global all-reduce (divide by the group size, SUM) until
// `start_localsgd_iter` steps have passed (a step ends with its last
// bucket); then an all-reduce within `subgroup` (nullptr: one subgroup per
// node, made on first use, collectively) or, without
// post_local_gradient_allreduce, no communication at all.
std::shared_ptr<CommHook> make_post_localsgd_hook(std::shared_ptr<Group> subgroup, int64_t start_localsgd_iter,
                                                  bool post_local_gradient_allreduce);

// PeriodicModelAverager: call step() after each optimizer step; on steps
// where step >= warmup_steps and (step - warmup_steps) % period == 0 the
// parameters are averaged over `group` (flattened, divided by the size, SUM).
class ModelAverager {
 public:
  ModelAverager(Group& group, int64_t period, int64_t warmup_steps);
  void step(const std::vector<at::Tensor>& params);
  int64_t steps_taken() const { return step_; }
  // A checkpoint's count, to go on from it.
  void set_steps_taken(int64_t steps);

 private:
  Group& group_;
  int64_t period_, warmup_, step_ = 0;
};

}  // namespace ddp::core