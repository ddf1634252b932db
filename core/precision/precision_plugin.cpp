#include "precision/precision_plugin.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include "common/error.h"
#include "model/script_module.h"
#include "precision/grad_scaler.h"

namespace ddp::core {
namespace {

at::ScalarType half_type(Precision p) {
  return p == Precision::Bf16Mixed || p == Precision::Bf16True ? at::kBFloat16 : at::kHalf;
}

// torch.autocast(device, dtype) as a scope: the previous state comes back,
// and the cast cache is cleared when the outermost scope ends.
class AutocastScope {
 public:
  AutocastScope(at::DeviceType device, at::ScalarType dtype)
      : device_(device),
        was_enabled_(at::autocast::is_autocast_enabled(device)),
        was_dtype_(at::autocast::get_autocast_dtype(device)) {
    at::autocast::set_autocast_enabled(device, true);
    at::autocast::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(device_, was_enabled_);
    at::autocast::set_autocast_dtype(device_, was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType device_;
  bool was_enabled_;
  at::ScalarType was_dtype_;
};

}  // namespace

PrecisionChoice resolve_precision(const std::string& flag, DeviceType accelerator) {
  PrecisionChoice c;
  if (flag.empty() || flag == "32-true" || flag == "32") return c;
  if (flag == "bf16-mixed" || flag == "bf16") {
    c.precision = Precision::Bf16Mixed;
  } else if (flag == "16-mixed" || flag == "16") {
    c.precision = Precision::Fp16Mixed;
    if (accelerator == DeviceType::CPU) {
      c.precision = Precision::Bf16Mixed;
      c.warning = "precision '" + flag +
                  "': AMP with fp16 is not supported on the CPU; using precision 'bf16-mixed' instead (as Lightning)";
    }
  } else if (flag == "bf16-true") {
    c.precision = Precision::Bf16True;
  } else if (flag == "16-true") {
    c.precision = Precision::Fp16True;
  } else {
    fail(Status::InvalidArgument, "precision '" + flag +
                                      "' is not one of \"32-true\", \"bf16-mixed\", \"16-mixed\", \"bf16-true\", "
                                      "\"16-true\"");
  }
  static const char* names[] = {"32-true", "bf16-mixed", "16-mixed", "bf16-true", "16-true"};
  c.name = names[static_cast<int>(c.precision)];
  return c;
}

PrecisionPlugin::PrecisionPlugin(PrecisionChoice choice, GradientClipping clipping, GradScalerOptions scaler)
    : choice_(std::move(choice)), clipping_(clipping), scaler_options_(scaler) {
  if (clipping_.value != 0) check_clip_value(clipping_.value, "gradient_clip_val");
}

PrecisionPlugin::~PrecisionPlugin() = default;

void PrecisionPlugin::convert_module(ScriptModule& module, at::Device device) {
  if (choice_.precision == Precision::Bf16True || choice_.precision == Precision::Fp16True)
    module.to(half_type(choice_.precision));
  prepare(device);
}

void PrecisionPlugin::prepare(at::Device device) {
  device_type_ = device.type();
  if (choice_.precision == Precision::Fp16Mixed) scaler_ = std::make_unique<GradScaler>(scaler_options_, device);
}

at::Tensor PrecisionPlugin::forward(ScriptModule& module, const at::Tensor& input) {
  return single_output(call(module, "forward", {input}), "module forward");
}

ModuleOutputs PrecisionPlugin::call(ScriptModule& module, const std::string& method,
                                    const std::vector<at::Tensor>& inputs, const std::vector<NamedTensor>& keywords) {
  switch (choice_.precision) {
    case Precision::Fp32True:
      return module.call(method, inputs, keywords);
    case Precision::Bf16True:
    case Precision::Fp16True: {
      // HalfPrecision.convert_input: floating inputs in the parameters' dtype.
      auto convert = [&](const at::Tensor& t) {
        return t.defined() && t.is_floating_point() ? t.to(half_type(choice_.precision)) : t;
      };
      std::vector<at::Tensor> cast;
      for (const auto& t : inputs) cast.push_back(convert(t));
      std::vector<NamedTensor> cast_keywords;
      for (const auto& k : keywords) cast_keywords.push_back({k.name, convert(k.tensor)});
      return module.call(method, cast, cast_keywords);
    }
    case Precision::Bf16Mixed:
    case Precision::Fp16Mixed:
      break;
  }
  ModuleOutputs out;
  {
    // The module moves the inputs to its device: autocast for that device.
    AutocastScope autocast(device_type_, half_type(choice_.precision));
    out = module.call(method, inputs, keywords);
  }
  for (auto& t : out.tensors)
    if (t.is_floating_point()) t = t.to(at::kFloat);
  return out;
}

std::shared_ptr<void> PrecisionPlugin::forward_context() const {
  if (choice_.precision != Precision::Bf16Mixed && choice_.precision != Precision::Fp16Mixed) return nullptr;
  return std::make_shared<AutocastScope>(device_type_, half_type(choice_.precision));
}

at::Tensor PrecisionPlugin::pre_backward(const at::Tensor& loss) const {
  return scaler_ ? scaler_->scale(loss) : loss;
}

bool PrecisionPlugin::optimizer_step(const std::vector<at::Tensor>& params, const std::function<void()>& step) {
  // MixedPrecision.optimizer_step: unscale before clipping, so that the
  // clip value means the true gradient; a step with an inf or NaN is
  // clipped all the same (as Lightning does) and then skipped.
  if (scaler_) scaler_->unscale(params);
  if (clipping_.value != 0) {
    if (clipping_.algorithm == ClipAlgorithm::Norm) clip_grad_norm(params, clipping_.value);
    else clip_grad_value(params, clipping_.value);
  }
  if (!scaler_) {
    step();
    return true;
  }
  bool stepped = scaler_->step(params, step);
  scaler_->update();
  return stepped;
}

std::vector<NamedTensor> PrecisionPlugin::state() const {
  return scaler_ ? scaler_->state() : std::vector<NamedTensor>{};
}

void PrecisionPlugin::check_state(const std::vector<NamedTensor>& saved) const {
  if (scaler_) scaler_->check_state(saved);
}

void PrecisionPlugin::load_state(const std::vector<NamedTensor>& saved) {
  if (scaler_) scaler_->load_state(saved);
}

}  // namespace ddp::core
