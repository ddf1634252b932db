#include "precision/grad_scaler.h"

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "common/error.h"

namespace ddp::core {

GradScaler::GradScaler(GradScalerOptions opts, at::Device device) : opts_(opts) {
  check_arg(std::isfinite(opts_.init_scale) && opts_.init_scale > 0,
            "grad scaler: init_scale " + std::to_string(opts_.init_scale) + " must be a positive number");
  check_arg(opts_.growth_factor > 1.0, "grad scaler: growth_factor " + std::to_string(opts_.growth_factor) +
                                           " must be above 1");
  check_arg(opts_.backoff_factor > 0 && opts_.backoff_factor < 1.0,
            "grad scaler: backoff_factor " + std::to_string(opts_.backoff_factor) + " must be in (0, 1)");
  check_arg(opts_.growth_interval > 0,
            "grad scaler: growth_interval " + std::to_string(opts_.growth_interval) + " must be positive");
  auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
  scale_ = at::full({}, opts_.init_scale, f32);
  growth_tracker_ = at::zeros({}, f32.dtype(at::kInt));
  found_inf_ = at::zeros({}, f32);
}

at::Tensor GradScaler::scale(const at::Tensor& loss) const {
  return loss * scale_.to(loss.device(), /*non_blocking=*/true);
}

void GradScaler::unscale(const std::vector<at::Tensor>& params) {
  if (unscaled_) fail(Status::State, "grad scaler: unscale was already called since the last update");
  // GradScaler takes the reciprocal in double, then float32.
  at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  found_inf_.zero_();
  std::vector<at::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (!grads.empty()) at::_amp_foreach_non_finite_check_and_unscale_(grads, found_inf_, inv_scale);
  unscaled_ = true;
}

bool GradScaler::step(const std::vector<at::Tensor>& params, const std::function<void()>& step) {
  if (!unscaled_) unscale(params);
  if (found_inf_.item<float>() != 0.0f) return false;
  step();
  return true;
}

void GradScaler::update() {
  at::_amp_update_scale_(scale_, growth_tracker_, found_inf_, opts_.growth_factor, opts_.backoff_factor,
                         opts_.growth_interval);
  found_inf_.zero_();
  unscaled_ = false;
}

double GradScaler::current_scale() const { return scale_.item<double>(); }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.item<int64_t>(); }

std::vector<NamedTensor> GradScaler::state() const {
  return {{"scale", scale_.to(at::kCPU).clone()}, {"growth_tracker", growth_tracker_.to(at::kCPU).clone()}};
}

namespace {
const at::Tensor* find(const std::vector<NamedTensor>& saved, const std::string& name) {
  for (const auto& t : saved)
    if (t.name == name) return &t.tensor;
  return nullptr;
}
}  // namespace

void GradScaler::check_state(const std::vector<NamedTensor>& saved) const {
  for (const char* name : {"scale", "growth_tracker"}) {
    const at::Tensor* t = find(saved, name);
    if (!t) fail(Status::IO, std::string("grad scaler state: '") + name + "' is missing");
    if (t->numel() != 1) fail(Status::IO, std::string("grad scaler state: '") + name + "' is not one number");
  }
  // What load_state fills into the float scale and the int32 tracker must
  // fit them: a fill that fails there would come after the strategy's
  // agreement that the checkpoint loads, with the modules loaded already.
  double s = find(saved, "scale")->to(at::kDouble).item<double>();
  if (!std::isfinite(s) || s <= 0 || s > std::numeric_limits<float>::max() || static_cast<float>(s) == 0)
    fail(Status::IO, "grad scaler state: the scale " + std::to_string(s) + " is not a positive float32 number");
  double g = find(saved, "growth_tracker")->to(at::kDouble).item<double>();
  if (!(g >= std::numeric_limits<int32_t>::min() && g <= std::numeric_limits<int32_t>::max()) || g != std::trunc(g))
    fail(Status::IO, "grad scaler state: the growth tracker " + std::to_string(g) + " is not an int32 count");
}

void GradScaler::load_state(const std::vector<NamedTensor>& saved) {
  check_state(saved);
  scale_.fill_(find(saved, "scale")->to(at::kDouble).item<double>());
  growth_tracker_.fill_(static_cast<int64_t>(find(saved, "growth_tracker")->to(at::kDouble).item<double>()));
  found_inf_.zero_();
  unscaled_ = false;
}

}  // namespace ddp::core
