#include "model/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
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

// A hyper-parameter of a saved param_group: a number (int or float in
// Python), or the current value where the group does not have it.
double group_number(const c10::impl::GenericDict& g, const char* key, double dflt) {
  auto it = g.find(key);
  if (it == g.end() || it->value().isNone()) return dflt;
  if (it->value().isDouble()) return it->value().toDouble();
  if (it->value().isInt()) return static_cast<double>(it->value().toInt());
  if (it->value().isBool()) return it->value().toBool() ? 1 : 0;
  fail(Status::IO, std::string("optimizer state: param_groups[0]['") + key + "'] is a " + it->value().tagKind() +
                       ", not a number");
}
bool group_flag(const c10::impl::GenericDict& g, const char* key, bool dflt) {
  return group_number(g, key, dflt ? 1 : 0) != 0;
}
// What differs between torch::optim's optimizers: the per-parameter state
// buffers by PyTorch's names, and the param_group's hyper-parameters.
template <typename Torch>
struct Kind;

template <>
struct Kind<torch::optim::SGD> {
  using State = torch::optim::SGDParamState;
  using Options = torch::optim::SGDOptions;
  static std::vector<std::pair<std::string, at::Tensor>> get(const State& s) {
    return {{"momentum_buffer", s.momentum_buffer()}};
  }
  static void set(State& s, const std::map<std::string, at::Tensor>& b) { s.momentum_buffer(b.at("momentum_buffer")); }
  static std::vector<std::string> required() { return {"momentum_buffer"}; }
  static std::vector<std::string> allowed() { return {"momentum_buffer"}; }
  static std::vector<std::string> group_keys() { return {"lr", "momentum", "dampening", "nesterov"}; }
  static double momentum(const Options& o) { return o.momentum(); }
  static void set_momentum(Options& o, double m) { o.momentum(m); }
  // PyTorch 2.11's SGD param_group, in its order.
  static void put_group(c10::impl::GenericDict& g, const Options& o) {
    g.insert("lr", o.lr());
    g.insert("momentum", o.momentum());
    g.insert("dampening", o.dampening());
    g.insert("weight_decay", o.weight_decay());
    g.insert("nesterov", o.nesterov());
    g.insert("maximize", false);
    g.insert("foreach", c10::IValue());
    g.insert("differentiable", false);
    g.insert("fused", c10::IValue());
  }
  static void take_group(const c10::impl::GenericDict& g, Options& o) {
    o.lr(group_number(g, "lr", o.lr()));
    o.momentum(group_number(g, "momentum", o.momentum()));
    o.dampening(group_number(g, "dampening", o.dampening()));
    o.weight_decay(group_number(g, "weight_decay", o.weight_decay()));
    o.nesterov(group_flag(g, "nesterov", o.nesterov()));
  }
};

// Adam's and AdamW's states and groups have the same entries.
template <typename AdamState, typename AdamOptions, bool kDecoupled>
struct AdamKind {
  using State = AdamState;
  using Options = AdamOptions;
  // PyTorch keeps the step as a float32 0-d tensor; LibTorch as an integer.
  static std::vector<std::pair<std::string, at::Tensor>> get(const State& s) {
    return {{"step", at::scalar_tensor(static_cast<double>(s.step()), at::kFloat)}, {"exp_avg", s.exp_avg()},
            {"exp_avg_sq", s.exp_avg_sq()}, {"max_exp_avg_sq", s.max_exp_avg_sq()}};
  }
  static void set(State& s, const std::map<std::string, at::Tensor>& b) {
    s.step(static_cast<int64_t>(b.at("step").item<double>()));
    s.exp_avg(b.at("exp_avg"));
    s.exp_avg_sq(b.at("exp_avg_sq"));
    if (b.count("max_exp_avg_sq")) s.max_exp_avg_sq(b.at("max_exp_avg_sq"));  // amsgrad only
  }
  static std::vector<std::string> required() { return {"step", "exp_avg", "exp_avg_sq"}; }
  static std::vector<std::string> allowed() { return {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}; }
  static std::vector<std::string> group_keys() { return {"lr", "betas", "eps", "amsgrad"}; }
  static double momentum(const Options& o) { return std::get<0>(o.betas()); }
  static void set_momentum(Options& o, double m) { o.betas({m, std::get<1>(o.betas())}); }
  static void put_group(c10::impl::GenericDict& g, const Options& o) {
    g.insert("lr", o.lr());
    g.insert("betas", c10::ivalue::Tuple::create(std::get<0>(o.betas()), std::get<1>(o.betas())));
    g.insert("eps", o.eps());
    g.insert("weight_decay", o.weight_decay());
    g.insert("amsgrad", o.amsgrad());
    g.insert("maximize", false);
    g.insert("foreach", c10::IValue());
    g.insert("capturable", false);
    g.insert("differentiable", false);
    g.insert("fused", c10::IValue());
    g.insert("decoupled_weight_decay", kDecoupled);
  }
  static void take_group(const c10::impl::GenericDict& g, Options& o) {
    o.lr(group_number(g, "lr", o.lr()));
    auto it = g.find("betas");
    if (it != g.end()) {
      const auto& b = it->value();
      if (!b.isTuple() || b.toTupleRef().elements().size() != 2)
        fail(Status::IO, "optimizer state: param_groups[0]['betas'] is not a pair");
      auto num = [](const c10::IValue& v) {
        if (v.isDouble()) return v.toDouble();
        if (v.isInt()) return static_cast<double>(v.toInt());
        fail(Status::IO, "optimizer state: param_groups[0]['betas'] holds a " + v.tagKind());
      };
      o.betas({num(b.toTupleRef().elements()[0]), num(b.toTupleRef().elements()[1])});
    }
    o.eps(group_number(g, "eps", o.eps()));
    o.weight_decay(group_number(g, "weight_decay", o.weight_decay()));
    o.amsgrad(group_flag(g, "amsgrad", o.amsgrad()));
  }
};
template <>
struct Kind<torch::optim::Adam> : AdamKind<torch::optim::AdamParamState, torch::optim::AdamOptions, false> {};
template <>
struct Kind<torch::optim::AdamW> : AdamKind<torch::optim::AdamWParamState, torch::optim::AdamWOptions, true> {};

c10::impl::GenericDict dict_at(const c10::IValue& v, const std::string& what) {
  if (!v.isGenericDict()) fail(Status::IO, "optimizer state: " + what + " is a " + v.tagKind() + ", not a dict");
  return v.toGenericDict();
}

template <typename Torch>
class TorchOptimizer : public Optimizer {
  using K = Kind<Torch>;
  using State = typename K::State;

 public:
  TorchOptimizer(const OptimizerSpec& spec, std::unique_ptr<Torch> opt, std::vector<at::Tensor> params)
      : spec_(spec), opt_(std::move(opt)), params_(std::move(params)) {}

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
  const OptimizerSpec& spec() const override { return spec_; }
  double lr() const override { return options().lr(); }
  void set_lr(double lr) override { options().lr(lr); }
  double momentum() const override { return K::momentum(options()); }
  void set_momentum(double m) override { K::set_momentum(options(), m); }
  std::map<std::string, double>& group_extras() override { return extras_; }

  c10::IValue state_dict() const override {
    c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
    auto& all = opt_->state();
    for (size_t i = 0; i < params_.size(); ++i) {
      auto it = all.find(params_[i].unsafeGetTensorImpl());
      if (it == all.end()) continue;
      c10::impl::GenericDict buffers(c10::StringType::get(), c10::AnyType::get());
      for (auto& [name, t] : K::get(static_cast<const State&>(*it->second)))
        if (t.defined()) buffers.insert(name, t);
      state.insert(static_cast<int64_t>(i), buffers);
    }
    c10::impl::GenericDict group(c10::StringType::get(), c10::AnyType::get());
    K::put_group(group, options());
    for (const auto& [key, value] : extras_) group.insert(key, value);
    c10::impl::GenericList indices(c10::AnyType::get());
    for (size_t i = 0; i < params_.size(); ++i) indices.push_back(static_cast<int64_t>(i));
    group.insert("params", indices);
    c10::impl::GenericList groups(c10::AnyType::get());
    groups.push_back(group);
    c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
    out.insert("state", state);
    out.insert("param_groups", groups);
    return out;
  }

  void check_state_dict(const c10::IValue& saved) const override { parse(saved); }

  void load_state_dict(const c10::IValue& saved) override {
    Parsed p = parse(saved);
    auto& all = opt_->state();
    std::map<at::TensorImpl*, std::unique_ptr<torch::optim::OptimizerParamState>> next;
    for (auto& [i, buffers] : p.by_param) {
      // The saved values are copied into the buffers the parameter already
      // has (a load then needs no memory for a second optimizer state), or
      // into new ones: never kept as they are, since they may point into
      // the checkpoint file's mapping.
      std::map<std::string, at::Tensor> old;
      auto it = all.find(params_[i].unsafeGetTensorImpl());
      if (it != all.end())
        for (auto& [name, t] : K::get(static_cast<const State&>(*it->second)))
          if (t.defined()) old[name] = t;
      auto state = std::make_unique<State>();
      std::map<std::string, at::Tensor> copies;
      at::NoGradGuard no_grad;
      for (auto& [name, t] : buffers) {
        if (name == "step") {
          copies[name] = t;
        } else if (old.count(name) && old[name].sizes() == t.sizes() && old[name].scalar_type() == t.scalar_type()) {
          copies[name] = old[name].copy_(t);
        } else {
          copies[name] = t.to(params_[i].device(), /*non_blocking=*/false, /*copy=*/true).contiguous();
        }
      }
      K::set(*state, copies);
      next[params_[i].unsafeGetTensorImpl()] = std::move(state);
    }
    all.clear();
    for (auto& [impl, state] : next) all[impl] = std::move(state);
    options() = p.options;
    if (!p.extras.empty()) extras_ = p.extras;
  }

 private:
  struct Parsed {
    std::map<size_t, std::map<std::string, at::Tensor>> by_param;
    typename K::Options options{0.0};
    std::map<std::string, double> extras;
  };

  typename K::Options& options() const {
    return static_cast<typename K::Options&>(opt_->param_groups().at(0).options());
  }

  // Every entry of `saved` checked against this optimizer's parameters.
  Parsed parse(const c10::IValue& saved) const {
    Parsed out;
    const auto top = dict_at(saved, "the optimizer's state_dict");
    auto st = top.find("state");
    auto pg = top.find("param_groups");
    if (st == top.end() || pg == top.end())
      fail(Status::IO, "optimizer state: it lacks 'state' or 'param_groups' (not a torch.optim state_dict)");
    for (const auto& entry : dict_at(st->value(), "'state'")) {
      if (!entry.key().isInt()) fail(Status::IO, "optimizer state: a 'state' key is a " + entry.key().tagKind());
      int64_t i = entry.key().toInt();
      if (i < 0 || static_cast<size_t>(i) >= params_.size())
        fail(Status::IO, "optimizer state: it has state for parameter " + std::to_string(i) + "; this optimizer has " +
                             std::to_string(params_.size()));
      auto allowed = K::allowed();
      for (const auto& b : dict_at(entry.value(), "state[" + std::to_string(i) + "]")) {
        std::string where = "state[" + std::to_string(i) + "]";
        if (!b.key().isString()) fail(Status::IO, "optimizer state: a key of " + where + " is not a string");
        const std::string name = b.key().toStringRef();
        where += "['" + name + "']";
        if (std::find(allowed.begin(), allowed.end(), name) == allowed.end())
          fail(Status::IO, "optimizer state: " + where + " is not a buffer of this optimizer (another kind's state?)");
        if (!b.value().isTensor()) fail(Status::IO, "optimizer state: " + where + " is a " + b.value().tagKind());
        const at::Tensor& t = b.value().toTensor();
        const at::Tensor& p = params_[static_cast<size_t>(i)];
        if (name == "step") {
          if (t.numel() != 1) fail(Status::IO, "optimizer state: " + where + " is not one number");
        } else if (t.sizes() != p.sizes() || t.scalar_type() != p.scalar_type()) {
          fail(Status::IO, "optimizer state: " + where + " has shape " + c10::str(t.sizes()) + " " +
                               std::string(c10::toString(t.scalar_type())) + ", its parameter " + c10::str(p.sizes()) +
                               " " + c10::toString(p.scalar_type()));
        }
        out.by_param[static_cast<size_t>(i)][name] = t;
      }
      for (const auto& name : K::required())
        if (!out.by_param[static_cast<size_t>(i)].count(name))
          fail(Status::IO, "optimizer state: parameter " + std::to_string(i) + " lacks '" + name + "'");
    }
    if (!pg->value().isList()) fail(Status::IO, "optimizer state: 'param_groups' is not a list");
    auto groups = pg->value().toList();
    out.options = options();
    // A libddp format-1 file kept no param_groups: the optimizer keeps its own.
    if (groups.empty()) return out;
    if (groups.size() != 1)
      fail(Status::IO, "optimizer state: it has " + std::to_string(groups.size()) + " param_groups; this optimizer 1");
    const auto g = dict_at(groups.get(0), "param_groups[0]");
    auto params = g.find("params");
    if (params == g.end() || !params->value().isList() || params->value().toListRef().size() != params_.size())
      fail(Status::IO, "optimizer state: param_groups[0]['params'] does not list " + std::to_string(params_.size()) +
                           " parameters (a checkpoint of another model?)");
    // Another kind's group (SGD's into Adam) would load numbers into the
    // wrong places: its hyper-parameters name the kind.
    for (const auto& key : K::group_keys())
      if (g.find(key) == g.end())
        fail(Status::IO, "optimizer state: param_groups[0] lacks '" + key + "' (another optimizer's state?)");
    K::take_group(g, out.options);
    for (const char* key : {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"})
      if (g.find(key) != g.end()) out.extras[key] = group_number(g, key, 0);
    return out;
  }

  OptimizerSpec spec_;
  std::unique_ptr<Torch> opt_;
  std::vector<at::Tensor> params_;
  std::map<std::string, double> extras_;
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
      return std::make_unique<TorchOptimizer<torch::optim::SGD>>(s, std::make_unique<torch::optim::SGD>(params, o),
                                                                  params);
    }
    case K::Adam: {
      torch::optim::AdamOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return std::make_unique<TorchOptimizer<torch::optim::Adam>>(s, std::make_unique<torch::optim::Adam>(params, o),
                                                                   params);
    }
    case K::AdamW: {
      torch::optim::AdamWOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return std::make_unique<TorchOptimizer<torch::optim::AdamW>>(
          s, std::make_unique<torch::optim::AdamW>(params, o), params);
    }
  }
  fail(Status::InvalidArgument, "optimizer: unknown kind");
}

}  // namespace ddp::core
