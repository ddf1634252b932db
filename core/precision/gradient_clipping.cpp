#include "precision/gradient_clipping.h"

#include <ATen/ATen.h>

#include <cmath>
#include <utility>

#include "common/error.h"

namespace ddp::core {
namespace {

// The defined gradients of `params`, grouped by (device, dtype) in the order
// each pair first appears, as _group_tensors_by_device_and_dtype does.
std::vector<std::vector<at::Tensor>> grads_by_device_and_dtype(const std::vector<at::Tensor>& params) {
  std::vector<std::pair<std::pair<at::Device, at::ScalarType>, std::vector<at::Tensor>>> groups;
  for (const auto& p : params) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    auto key = std::make_pair(g.device(), g.scalar_type());
    auto it = groups.begin();
    while (it != groups.end() && it->first != key) ++it;
    if (it == groups.end()) it = groups.insert(groups.end(), {key, {}});
    it->second.push_back(g);
  }
  std::vector<std::vector<at::Tensor>> out;
  for (auto& kv : groups) out.push_back(std::move(kv.second));
  return out;
}

}  // namespace

void check_clip_value(double value, const std::string& what) {
  check_arg(std::isfinite(value) && value > 0,
            what + " " + std::to_string(value) + " must be a positive number (0 turns clipping off)");
}

at::Tensor clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  at::NoGradGuard no_grad;
  auto groups = grads_by_device_and_dtype(params);
  if (groups.empty()) return at::zeros({});
  at::Device first = groups.front().front().device();
  std::vector<at::Tensor> norms;
  for (const auto& g : groups)
    for (auto& n : at::_foreach_norm(g, 2.0)) norms.push_back(n.to(first));
  at::Tensor total = at::linalg_vector_norm(at::stack(norms), 2.0);
  // Python's `max_norm / tensor` is reciprocal(tensor) * max_norm.
  at::Tensor coef = at::clamp(at::reciprocal(total + 1e-6) * max_norm, c10::nullopt, 1.0);
  for (const auto& g : groups) at::_foreach_mul_(g, coef.to(g.front().device()));
  return total;
}

void clip_grad_value(const std::vector<at::Tensor>& params, double clip_value) {
  at::NoGradGuard no_grad;
  for (const auto& g : grads_by_device_and_dtype(params)) {
    at::_foreach_clamp_min_(g, -clip_value);
    at::_foreach_clamp_max_(g, clip_value);
  }
}

}  // namespace ddp::core
