#include "model/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <map>
#include <string>

#include "common/error.h"

namespace ddp::core {
namespace {

void check_spec(const OptimizerSpec& s) {
  check_arg(s.lr >= 0, "optimizer: lr " + std::to_string(s.lr) + " is negative");
  check_arg(s.weight_decay >= 0, "optimizer: weight_decay " + std::to_string(s.weight_decay) + " is negative");
  check_arg(s.momentum >= 0, "optimizer: momentum " + std::to_string(s.momentum) + " is negative");
  check_arg(!s.nesterov || (s.momentum > 0 && s.dampening == 0),
            "optimizer: nesterov needs a momentum and zero dampening");
  check_arg(s.beta1 >= 0 && s.beta1 < 1, "optimizer: beta1 " + std::to_string(s.beta1) + " is outside [0, 1)");
  check_arg(s.beta2 >= 0 && s.beta2 < 1, "optimizer: beta2 " + std::to_string(s.beta2) + " is outside [0, 1)");
  check_arg(s.eps >= 0, "optimizer: eps " + std::to_string(s.eps) + " is negative");
}

// The state buffers of one kind of torch::optim optimizer, by name.
template <typename State>
struct Buffers;

template <>
struct Buffers<torch::optim::SGDParamState> {
  static std::vector<std::pair<std::string, at::Tensor>> get(const torch::optim::SGDParamState& s) {
    return {{"momentum_buffer", s.momentum_buffer()}};
  }
  static void set(torch::optim::SGDParamState& s, const std::map<std::string, at::Tensor>& b) {
    s.momentum_buffer(b.at("momentum_buffer"));
  }
  static std::vector<std::string> required() { return {"momentum_buffer"}; }
};

// Adam's and AdamW's states have the same buffers.
template <typename AdamState>
struct AdamBuffers {
  static std::vector<std::pair<std::string, at::Tensor>> get(const AdamState& s) {
    return {{"step", at::scalar_tensor(s.step(), at::kLong)}, {"exp_avg", s.exp_avg()},
            {"exp_avg_sq", s.exp_avg_sq()}, {"max_exp_avg_sq", s.max_exp_avg_sq()}};
  }
  static void set(AdamState& s, const std::map<std::string, at::Tensor>& b) {
    s.step(b.at("step").item<int64_t>());
    s.exp_avg(b.at("exp_avg"));
    s.exp_avg_sq(b.at("exp_avg_sq"));
    if (b.count("max_exp_avg_sq")) s.max_exp_avg_sq(b.at("max_exp_avg_sq"));  // amsgrad only
  }
  static std::vector<std::string> required() { return {"step", "exp_avg", "exp_avg_sq"}; }
};
template <>
struct Buffers<torch::optim::AdamParamState> : AdamBuffers<torch::optim::AdamParamState> {};
template <>
struct Buffers<torch::optim::AdamWParamState> : AdamBuffers<torch::optim::AdamWParamState> {};

template <typename Torch, typename State>
class TorchOptimizer : public Optimizer {
 public:
  TorchOptimizer(std::unique_ptr<Torch> opt, std::vector<at::Tensor> params)
      : opt_(std::move(opt)), params_(std::move(params)) {}

  // As Python's zero_grad(set_to_none=True): the gradients are dropped.
  // torch::optim's zero_grad would detach_() each first, which a bucket view
  // (gradient_as_bucket_view) refuses.
  void zero_grad() override {
    for (auto& group : opt_->param_groups())
      for (auto& p : group.params())
        if (p.grad().defined()) p.mutable_grad().reset();
  }
  void step() override { opt_->step(); }
  const std::vector<at::Tensor>& parameters() const override { return params_; }

  std::vector<NamedTensor> state() const override {
    std::vector<NamedTensor> out;
    auto& all = opt_->state();
    for (size_t i = 0; i < params_.size(); ++i) {
      auto it = all.find(params_[i].unsafeGetTensorImpl());
      if (it == all.end()) continue;
      for (auto& [name, t] : Buffers<State>::get(static_cast<const State&>(*it->second)))
        if (t.defined()) out.push_back({std::to_string(i) + "." + name, t});
    }
    return out;
  }

  // The saved entries by parameter index and buffer name, each checked.
  std::map<size_t, std::map<std::string, at::Tensor>> grouped(const std::vector<NamedTensor>& saved) const {
    std::map<size_t, std::map<std::string, at::Tensor>> by_param;
    for (const auto& s : saved) {
      auto dot = s.name.find('.');
      size_t i = 0;
      try {
        i = std::stoul(s.name.substr(0, dot));
      } catch (...) {
        fail(Status::IO, "optimizer state: entry '" + s.name + "' does not name a parameter");
      }
      if (dot == std::string::npos || i >= params_.size())
        fail(Status::IO, "optimizer state: entry '" + s.name + "' is for a parameter this optimizer does not have");
      const std::string buffer = s.name.substr(dot + 1);
      if (buffer != "step" && (s.tensor.sizes() != params_[i].sizes() || s.tensor.scalar_type() != params_[i].scalar_type()))
        fail(Status::IO, "optimizer state: '" + s.name + "' does not match its parameter's shape or dtype");
      by_param[i][buffer] = s.tensor;
    }
    for (auto& [i, buffers] : by_param)
      for (const auto& name : Buffers<State>::required())
        if (!buffers.count(name))
          fail(Status::IO, "optimizer state: parameter " + std::to_string(i) + " lacks '" + name + "'");
    return by_param;
  }

  void check_state(const std::vector<NamedTensor>& saved) const override { grouped(saved); }

  void load_state(const std::vector<NamedTensor>& saved) override {
    auto by_param = grouped(saved);
    auto& all = opt_->state();
    for (auto& [i, buffers] : by_param) {
      auto state = std::make_unique<State>();
      std::map<std::string, at::Tensor> copies;
      for (auto& [name, t] : buffers) copies[name] = name == "step" ? t : t.to(params_[i].device()).clone();
      Buffers<State>::set(*state, copies);
      all[params_[i].unsafeGetTensorImpl()] = std::move(state);
    }
  }

 private:
  std::unique_ptr<Torch> opt_;
  std::vector<at::Tensor> params_;
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& s, std::vector<at::Tensor> params) {
  check_spec(s);
  check_arg(!params.empty(), "optimizer: no parameters");
  using K = OptimizerSpec::Kind;
  switch (s.kind) {
    case K::Sgd: {
      torch::optim::SGDOptions o(s.lr);
      o.momentum(s.momentum).dampening(s.dampening).weight_decay(s.weight_decay).nesterov(s.nesterov);
      return std::make_unique<TorchOptimizer<torch::optim::SGD, torch::optim::SGDParamState>>(
          std::make_unique<torch::optim::SGD>(params, o), params);
    }
    case K::Adam: {
      torch::optim::AdamOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return std::make_unique<TorchOptimizer<torch::optim::Adam, torch::optim::AdamParamState>>(
          std::make_unique<torch::optim::Adam>(params, o), params);
    }
    case K::AdamW: {
      torch::optim::AdamWOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return std::make_unique<TorchOptimizer<torch::optim::AdamW, torch::optim::AdamWParamState>>(
          std::make_unique<torch::optim::AdamW>(params, o), params);
    }
  }
  fail(Status::InvalidArgument, "optimizer: unknown kind");
}

}  // namespace ddp::core
