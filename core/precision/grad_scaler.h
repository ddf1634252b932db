// torch.amp.GradScaler for the strategy's "16-mixed" precision: the loss is
// multiplied by a scale before backward so that small float16 gradients do
// not flush to zero; before the optimizer step the gradients are divided by
// it again, and a step whose gradients hold an inf or a NaN is skipped while
// the scale backs off. Its arithmetic is PyTorch's own kernels
// (_amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_), so the
// scale sequence is GradScaler's, step by step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "checkpoint/checkpoint_file.h"

namespace ddp::core {

struct GradScalerOptions {  // torch.amp.GradScaler's defaults
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  // Status::InvalidArgument naming a bad option (as GradScaler's asserts).
  explicit GradScaler(GradScalerOptions opts = {}, at::Device device = at::kCPU);

  // loss * scale (GradScaler.scale).
  at::Tensor scale(const at::Tensor& loss) const;
  // Divides every defined gradient of `params` by the scale in place and
  // records whether any was inf or NaN (GradScaler.unscale_). Once per step:
  // a second call before update() is Status::State.
  void unscale(const std::vector<at::Tensor>& params);
  // Unscales when not done yet, then runs `step` unless a gradient was not
  // finite (GradScaler.step). Returns whether the step ran.
  bool step(const std::vector<at::Tensor>& params, const std::function<void()>& step);
  // The scale for the next iteration (GradScaler.update).
  void update();

  double current_scale() const;
  int64_t growth_tracker() const;
  // GradScaler.state_dict's tensors: "scale", "growth_tracker" (float32 and
  // int32 scalars, on the CPU); load_state checks both before changing any.
  std::vector<NamedTensor> state() const;
  void check_state(const std::vector<NamedTensor>& saved) const;
  void load_state(const std::vector<NamedTensor>& saved);

 private:
  GradScalerOptions opts_;
  at::Tensor scale_;           // float32, one element, on the gradients' device
  at::Tensor growth_tracker_;  // int32, one element
  at::Tensor found_inf_;       // float32, one element: this step's verdict
  bool unscaled_ = false;
};

}  // namespace ddp::core
