// Lightning's precision plugins for the strategy, by Lightning's names:
//   "32-true"     nothing changes (the default);
//   "bf16-mixed"  forward under autocast to bfloat16 (CPU and CUDA);
//   "16-mixed"    forward under autocast to float16 with a gradient scaler
//                 (CUDA; on the CPU Lightning 2.6 warns that fp16 AMP is not
//                 supported there and uses bf16-mixed: so do we, and the
//                 warning is kept for the caller);
//   "bf16-true", "16-true"  parameters, buffers and inputs cast.
// Gradient clipping (Lightning's gradient_clip_val / _algorithm) belongs to
// the plugin because it must run after the scaler unscaled the gradients.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "common/types.h"
#include "model/script_module.h"
#include "precision/grad_scaler.h"
#include "precision/gradient_clipping.h"

namespace ddp::core {

class Optimizer;

enum class Precision { Fp32True, Bf16Mixed, Fp16Mixed, Bf16True, Fp16True };

struct PrecisionChoice {
  Precision precision = Precision::Fp32True;
  std::string name = "32-true";  // the one in effect
  std::string warning;           // why it differs from the one asked for; "" when it does not
};

// Lightning's name ("" is "32-true"; "bf16" and "16" are taken as Lightning
// takes them, the mixed ones) for `accelerator`. Status::InvalidArgument
// listing the names for any other.
PrecisionChoice resolve_precision(const std::string& flag, DeviceType accelerator);

struct GradientClipping {
  double value = 0;  // 0: off
  ClipAlgorithm algorithm = ClipAlgorithm::Norm;
};

class PrecisionPlugin {
 public:
  PrecisionPlugin(PrecisionChoice choice, GradientClipping clipping, GradScalerOptions scaler = {});
  ~PrecisionPlugin();

  const PrecisionChoice& choice() const { return choice_; }
  // The module on `device` becomes this precision's (true precisions cast
  // it); the gradient scaler, where there is one, is made on that device.
  void convert_module(ScriptModule& module, at::Device device);
  // The part of convert_module that needs no module: the device autocast
  // runs for, and the gradient scaler.
  void prepare(at::Device device);
  // The module's forward in this precision's context. A mixed precision's
  // output leaves as float32, as Fabric's convert_output returns it, so a
  // loss computed on it is the one autocast computes (losses run in float32
  // under autocast).
  at::Tensor forward(ScriptModule& module, const at::Tensor& input);
  // The same for any method with any number of inputs and outputs.
  ModuleOutputs call(ScriptModule& module, const std::string& method, const std::vector<at::Tensor>& inputs,
                     const std::vector<NamedTensor>& keywords = {});
  // The forward's precision context for a model the caller runs itself:
  // autocast for the mixed precisions (its output is the caller's to cast),
  // nothing otherwise; it lasts as long as the returned object.
  std::shared_ptr<void> forward_context() const;
  // The loss backward runs on (scaled by the gradient scaler).
  at::Tensor pre_backward(const at::Tensor& loss) const;
  // Unscales, clips, runs `step` unless the scaler found a gradient that is
  // not finite, and updates the scale. Returns whether `step` ran.
  bool optimizer_step(const std::vector<at::Tensor>& params, const std::function<void()>& step);

  // The scaler's state (empty without one), under Lightning's checkpoint key.
  static const char* checkpoint_key() { return "MixedPrecision"; }
  std::vector<NamedTensor> state() const;
  void check_state(const std::vector<NamedTensor>& saved) const;
  void load_state(const std::vector<NamedTensor>& saved);
  const GradScaler* scaler() const { return scaler_.get(); }

 private:
  PrecisionChoice choice_;
  GradientClipping clipping_;
  GradScalerOptions scaler_options_;
  at::DeviceType device_type_ = at::kCPU;  // the module's, from prepare
  std::unique_ptr<GradScaler> scaler_;
};

}  // namespace ddp::core
