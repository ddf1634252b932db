#include "model/optimizer.h"

#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <type_traits>
#include <typeinfo>
#include <map>
#include <string>

#include "common/error.h"

namespace ddp::core {
namespace {

void check_spec(const OptimizerSpec& s) {
  check_arg(s.lr >= 0, "optimizer: lr " + std::to_string(s.lr) + " is not a number >= 0");
  check_arg(s.weight_decay >= 0, "optimizer: weight_decay " + std::to_string(s.weight_decay) + " is not a number >= 0");
  check_arg(s.momentum >= 0, "optimizer: momentum " + std::to_string(s.momentum) + " is not a number >= 0");
  check_arg(!s.nesterov || (s.momentum > 0 && s.dampening == 0),
            "optimizer: nesterov needs a momentum and zero dampening");
  check_arg(s.beta1 >= 0 && s.beta1 < 1, "optimizer: beta1 " + std::to_string(s.beta1) + " is outside [0, 1)");
  check_arg(s.beta2 >= 0 && s.beta2 < 1, "optimizer: beta2 " + std::to_string(s.beta2) + " is outside [0, 1)");
  check_arg(s.eps >= 0, "optimizer: eps " + std::to_string(s.eps) + " is not a number >= 0");
}

// A hyper-parameter of a saved param_group: a number (int or float in
// Python), or the current value where the group does not have it.
double group_number(const c10::impl::GenericDict& g, const char* key, double dflt, size_t index = 0) {
  auto it = g.find(key);
  if (it == g.end() || it->value().isNone()) return dflt;
  if (it->value().isDouble()) return it->value().toDouble();
  if (it->value().isInt()) return static_cast<double>(it->value().toInt());
  if (it->value().isBool()) return it->value().toBool() ? 1 : 0;
  fail(Status::IO, "optimizer state: param_groups[" + std::to_string(index) + "]['" + key + "'] is a " +
                       it->value().tagKind() + ", not a number");
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
  static OptimizerSpec spec(const Options& o) {
    OptimizerSpec s;
    s.kind = OptimizerSpec::Kind::Sgd;
    s.lr = o.lr();
    s.momentum = o.momentum();
    s.dampening = o.dampening();
    s.nesterov = o.nesterov();
    s.weight_decay = o.weight_decay();
    return s;
  }
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
  static OptimizerSpec spec(const Options& o) {
    OptimizerSpec s;
    s.kind = kDecoupled ? OptimizerSpec::Kind::AdamW : OptimizerSpec::Kind::Adam;
    s.lr = o.lr();
    s.beta1 = std::get<0>(o.betas());
    s.beta2 = std::get<1>(o.betas());
    s.eps = o.eps();
    s.amsgrad = o.amsgrad();
    s.weight_decay = o.weight_decay();
    return s;
  }
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
  // `opt`: made here (owned), or the caller's (a shared_ptr that deletes nothing).
  TorchOptimizer(const OptimizerSpec& spec, std::shared_ptr<Torch> opt, std::vector<size_t> group_sizes)
      : spec_(spec), opt_(std::move(opt)), group_sizes_(std::move(group_sizes)), extras_(group_sizes_.size()) {
    for (auto& group : opt_->param_groups())
      for (auto& p : group.params()) params_.push_back(p);
  }

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
  size_t num_groups() const override { return group_sizes_.size(); }
  double lr() const override { return options(0).lr(); }
  double group_lr(size_t g) const override { return options(checked_group(g)).lr(); }
  void set_group_lr(size_t g, double lr) override { options(checked_group(g)).lr(lr); }
  void set_lr(double lr) override {
    for (size_t g = 0; g < num_groups(); ++g) options(g).lr(lr);
  }
  double momentum() const override { return K::momentum(options(0)); }
  void set_momentum(double m) override {
    for (size_t g = 0; g < num_groups(); ++g) K::set_momentum(options(g), m);
  }
  void set_group_momentum(size_t g, double m) override { K::set_momentum(options(checked_group(g)), m); }
  std::map<std::string, double>& group_extras(size_t g) override { return extras_.at(checked_group(g)); }

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
    // torch.optim numbers the parameters across the groups, in order.
    c10::impl::GenericList groups(c10::AnyType::get());
    int64_t next = 0;
    for (size_t g = 0; g < num_groups(); ++g) {
      c10::impl::GenericDict group(c10::StringType::get(), c10::AnyType::get());
      K::put_group(group, options(g));
      for (const auto& [key, value] : extras_[g]) group.insert(key, value);
      c10::impl::GenericList indices(c10::AnyType::get());
      for (size_t i = 0; i < group_sizes_[g]; ++i) indices.push_back(next++);
      group.insert("params", indices);
      groups.push_back(group);
    }
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
    for (size_t g = 0; g < p.options.size(); ++g) {
      options(g) = p.options[g];
      if (!p.extras[g].empty()) extras_[g] = p.extras[g];
    }
  }

 private:
  struct Parsed {
    std::map<size_t, std::map<std::string, at::Tensor>> by_param;
    std::vector<typename K::Options> options;  // one per group; empty: keep the optimizer's
    std::vector<std::map<std::string, double>> extras;
  };

  size_t checked_group(size_t g) const {
    check_arg(g < num_groups(), "optimizer: param group " + std::to_string(g) + " is past its " +
                                    std::to_string(num_groups()) + " groups");
    return g;
  }

  typename K::Options& options(size_t g) const {
    return static_cast<typename K::Options&>(opt_->param_groups().at(g).options());
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
    // A libddp format-1 file kept no param_groups: the optimizer keeps its own.
    if (groups.empty()) return out;
    if (groups.size() != num_groups())
      fail(Status::IO, "optimizer state: it has " + std::to_string(groups.size()) + " param_groups; this optimizer " +
                           std::to_string(num_groups()));
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      const std::string where = "param_groups[" + std::to_string(gi) + "]";
      const auto g = dict_at(groups.get(gi), where);
      auto params = g.find("params");
      if (params == g.end() || !params->value().isList() || params->value().toListRef().size() != group_sizes_[gi])
        fail(Status::IO, "optimizer state: " + where + "['params'] does not list " + std::to_string(group_sizes_[gi]) +
                             " parameters (a checkpoint of another model, or other groups?)");
      // Another kind's group (SGD's into Adam) would load numbers into the
      // wrong places: its hyper-parameters name the kind.
      for (const auto& key : K::group_keys())
        if (g.find(key) == g.end())
          fail(Status::IO, "optimizer state: " + where + " lacks '" + key + "' (another optimizer's state?)");
      out.options.push_back(options(gi));
      K::take_group(g, out.options.back());
      out.extras.emplace_back();
      for (const char* key : {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"})
        if (g.find(key) != g.end()) out.extras.back()[key] = group_number(g, key, 0, gi);
    }
    return out;
  }

  OptimizerSpec spec_;
  std::shared_ptr<Torch> opt_;
  std::vector<size_t> group_sizes_;
  std::vector<at::Tensor> params_;  // every group's, in order
  std::vector<std::map<std::string, double>> extras_;  // per group
};

}  // namespace

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& s, std::vector<at::Tensor> params) {
  ParamGroup all;
  all.params = std::move(params);
  return make(s, std::vector<ParamGroup>{std::move(all)});
}

namespace {

// torch.optim's defaults with the group's own values over them.
template <typename Options>
std::unique_ptr<Options> group_options(const Options& defaults, const ParamGroup& g, const OptimizerSpec& s,
                                       size_t index) {
  auto o = std::make_unique<Options>(defaults);
  const std::string where = "optimizer: param group " + std::to_string(index) + ": ";
  if (g.lr) {
    check_arg(*g.lr >= 0, where + "lr " + std::to_string(*g.lr) + " is negative");
    o->lr(*g.lr);
  }
  if (g.weight_decay) {
    check_arg(*g.weight_decay >= 0, where + "weight_decay " + std::to_string(*g.weight_decay) + " is negative");
    o->weight_decay(*g.weight_decay);
  }
  if constexpr (std::is_same_v<Options, torch::optim::SGDOptions>) {
    if (g.momentum) {
      check_arg(*g.momentum >= 0, where + "momentum " + std::to_string(*g.momentum) + " is negative");
      check_arg(!s.nesterov || *g.momentum > 0, where + "nesterov needs a momentum");
      o->momentum(*g.momentum);
    }
  } else {
    check_arg(!g.momentum, where + "momentum is SGD's (Adam's is beta1)");
  }
  return o;
}

template <typename Torch, typename Options>
std::unique_ptr<Optimizer> make_torch(const OptimizerSpec& s, const Options& defaults,
                                      const std::vector<ParamGroup>& groups) {
  std::vector<torch::optim::OptimizerParamGroup> torch_groups;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < groups.size(); ++i) {
    check_arg(!groups[i].params.empty(), "optimizer: param group " + std::to_string(i) + " has no parameters");
    torch_groups.emplace_back(groups[i].params, group_options(defaults, groups[i], s, i));
    sizes.push_back(groups[i].params.size());
  }
  return std::make_unique<TorchOptimizer<Torch>>(s, std::make_unique<Torch>(torch_groups, defaults), sizes);
}

}  // namespace

namespace {

template <typename Torch>
std::unique_ptr<Optimizer> borrow_as(Torch& opt) {
  std::vector<size_t> sizes;
  for (auto& group : opt.param_groups()) sizes.push_back(group.params().size());
  check_arg(!sizes.empty(), "optimizer: the torch::optim optimizer has no parameter groups");
  auto spec = Kind<Torch>::spec(static_cast<const typename Kind<Torch>::Options&>(opt.param_groups()[0].options()));
  return std::make_unique<TorchOptimizer<Torch>>(spec, std::shared_ptr<Torch>(&opt, [](Torch*) {}), sizes);
}

}  // namespace

std::unique_ptr<Optimizer> Optimizer::borrow(torch::optim::Optimizer& opt) {
  if (auto* sgd = dynamic_cast<torch::optim::SGD*>(&opt)) return borrow_as(*sgd);
  if (auto* adam = dynamic_cast<torch::optim::Adam*>(&opt)) return borrow_as(*adam);
  if (auto* adamw = dynamic_cast<torch::optim::AdamW*>(&opt)) return borrow_as(*adamw);
  fail(Status::InvalidArgument, std::string("optimizer: a torch::optim optimizer of type ") + typeid(opt).name() +
                                    " is none of SGD, Adam and AdamW, the kinds whose state checkpoints hold");
}

std::unique_ptr<Optimizer> Optimizer::make(const OptimizerSpec& s, const std::vector<ParamGroup>& groups) {
  check_spec(s);
  check_arg(!groups.empty(), "optimizer: no parameters");
  using K = OptimizerSpec::Kind;
  switch (s.kind) {
    case K::Sgd: {
      torch::optim::SGDOptions o(s.lr);
      o.momentum(s.momentum).dampening(s.dampening).weight_decay(s.weight_decay).nesterov(s.nesterov);
      return make_torch<torch::optim::SGD>(s, o, groups);
    }
    case K::Adam: {
      torch::optim::AdamOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return make_torch<torch::optim::Adam>(s, o, groups);
    }
    case K::AdamW: {
      torch::optim::AdamWOptions o(s.lr);
      o.betas({s.beta1, s.beta2}).eps(s.eps).weight_decay(s.weight_decay).amsgrad(s.amsgrad);
      return make_torch<torch::optim::AdamW>(s, o, groups);
    }
  }
  fail(Status::InvalidArgument, "optimizer: unknown kind");
}

}  // namespace ddp::core
