#include "model/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/error.h"

namespace ddp::core {
namespace {

using Dict = c10::impl::GenericDict;
constexpr double kPi = 3.141592653589793;  // math.pi

Dict new_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

c10::impl::GenericList list_of(const std::vector<double>& v) {
  c10::impl::GenericList l(c10::AnyType::get());
  for (double x : v) l.push_back(x);
  return l;
}

// A saved scheduler's entries, each read with the type PyTorch writes (an
// int where Python keeps an int; a float that Python may have kept as int).
class Saved {
 public:
  Saved(const c10::IValue& v, const std::string& kind) : kind_(kind) {
    if (!v.isGenericDict()) fail(Status::IO, "lr scheduler state: a " + v.tagKind() + ", not a dict");
    d_ = v.toGenericDict();
  }
  const c10::IValue& at(const std::string& key) const {
    auto it = d_.find(key);
    if (it == d_.end())
      fail(Status::IO, "lr scheduler state: it lacks '" + key + "' (not the state of a " + kind_ + "?)");
    return it->value();
  }
  bool has(const std::string& key) const { return d_.find(key) != d_.end(); }
  double number(const std::string& key) const { return as_number(at(key), key); }
  int64_t integer(const std::string& key) const {
    const auto& v = at(key);
    if (!v.isInt()) wrong(key, v, "an int");
    return v.toInt();
  }
  // A count that each step adds one to (last_epoch, _step_count, ...),
  // within kMostSteps (types.h).
  int64_t counter(const std::string& key) const {
    int64_t v = integer(key);
    if (v < -kMostSteps || v > kMostSteps)
      fail(Status::IO, "lr scheduler state: " + key + " " + std::to_string(v) + " is out of range (at most 2^62 steps)");
    return v;
  }
  // A period or count that the formulas divide by.
  int64_t positive(const std::string& key) const {
    int64_t v = integer(key);
    if (v <= 0) fail(Status::IO, "lr scheduler state: " + key + " " + std::to_string(v) + " is not positive");
    return v;
  }
  bool flag(const std::string& key) const {
    const auto& v = at(key);
    if (!v.isBool()) wrong(key, v, "a bool");
    return v.toBool();
  }
  std::string text(const std::string& key) const {
    const auto& v = at(key);
    if (!v.isString()) wrong(key, v, "a string");
    return v.toStringRef();
  }
  // A list of one number per param group (base_lrs, _last_lr, min_lrs).
  std::vector<double> per_group(const std::string& key, size_t groups) const {
    const auto& v = at(key);
    if (!v.isList() || v.toListRef().size() != groups)
      wrong(key, v, ("a list of " + std::to_string(groups) + " numbers (one per param group)").c_str());
    std::vector<double> out;
    for (const auto& e : v.toListRef()) out.push_back(as_number(e, key));
    return out;
  }
  const c10::IValue& list(const std::string& key) const {
    const auto& v = at(key);
    if (!v.isList()) wrong(key, v, "a list");
    return v;
  }
  double as_number(const c10::IValue& v, const std::string& key) const {
    if (v.isDouble()) return v.toDouble();
    if (v.isInt()) return static_cast<double>(v.toInt());
    wrong(key, v, "a number");
  }
  [[noreturn]] void wrong(const std::string& key, const c10::IValue& v, const char* want) const {
    fail(Status::IO, "lr scheduler state: '" + key + "' is a " + v.tagKind() + ", not " + want);
  }

 private:
  Dict d_ = new_dict();
  std::string kind_;
};

// LRScheduler's own entries, common to the chainable schedulers.
class Chainable : public LrScheduler {
 public:
  using LrScheduler::LrScheduler;
  c10::IValue state_dict() const override {
    Dict d = new_dict();
    own_state(d);
    d.insert("base_lrs", list_of(base_lrs_));
    d.insert("last_epoch", last_epoch);
    d.insert("_step_count", step_count_);
    d.insert("_is_initial", false);
    d.insert("_get_lr_called_within_step", false);
    d.insert("_last_lr", list_of(last_lrs_));
    return d;
  }
  void check_state_dict(const c10::IValue& v) const override {
    Saved s(v, name());
    s.per_group("base_lrs", groups());
    s.counter("last_epoch");
    s.counter("_step_count");
    s.per_group("_last_lr", groups());
    const_cast<Chainable*>(this)->own_load(s, /*apply=*/false);
  }
  void load_state_dict(const c10::IValue& v) override {
    check_state_dict(v);
    Saved s(v, name());
    base_lrs_ = s.per_group("base_lrs", groups());
    last_epoch = s.counter("last_epoch");
    step_count_ = s.counter("_step_count");
    last_lrs_ = s.per_group("_last_lr", groups());
    own_load(s, /*apply=*/true);
  }

 protected:
  virtual const char* name() const = 0;
  virtual void own_state(Dict& d) const = 0;
  // Reads (and with apply, takes) the scheduler's own arguments.
  virtual void own_load(const Saved& s, bool apply) = 0;
  double lr() const { return optimizer_->group_lr(group_); }
  size_t groups() const { return optimizer_->num_groups(); }
};

class StepLR : public Chainable {
 public:
  using Chainable::Chainable;
  double get_lr() override {
    if (last_epoch == 0 || last_epoch % spec_.step_size != 0) return lr();
    return lr() * spec_.gamma;
  }
  std::optional<double> closed_form_lr() const override {
    return base_lr_ * std::pow(spec_.gamma, static_cast<double>(floor_div(last_epoch, spec_.step_size)));
  }
  static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
  const char* name() const override { return "StepLR"; }
  void own_state(Dict& d) const override {
    d.insert("step_size", spec_.step_size);
    d.insert("gamma", spec_.gamma);
  }
  void own_load(const Saved& s, bool apply) override {
    int64_t step_size = s.positive("step_size");
    double gamma = s.number("gamma");
    if (apply) spec_.step_size = step_size, spec_.gamma = gamma;
  }
};

class MultiStepLR : public Chainable {
 public:
  using Chainable::Chainable;
  // Python keeps the milestones as a Counter: a milestone given twice
  // multiplies by gamma twice.
  int64_t count(int64_t epoch) const { return std::count(spec_.milestones.begin(), spec_.milestones.end(), epoch); }
  double get_lr() override {
    int64_t n = count(last_epoch);
    if (n == 0) return lr();
    return lr() * std::pow(spec_.gamma, static_cast<double>(n));
  }
  std::optional<double> closed_form_lr() const override {
    std::vector<int64_t> m = spec_.milestones;
    std::sort(m.begin(), m.end());
    auto passed = std::upper_bound(m.begin(), m.end(), last_epoch) - m.begin();
    return base_lr_ * std::pow(spec_.gamma, static_cast<double>(passed));
  }
  const char* name() const override { return "MultiStepLR"; }
  // As {milestone: count}, a plain dict (Python's Counter is a class a
  // weights-only load refuses; its load_state_dict takes the dict).
  void own_state(Dict& d) const override {
    Dict m(c10::IntType::get(), c10::AnyType::get());
    for (int64_t e : spec_.milestones) m.insert_or_assign(e, count(e));
    d.insert("milestones", m);
    d.insert("gamma", spec_.gamma);
  }
  void own_load(const Saved& s, bool apply) override {
    const auto& v = s.at("milestones");
    if (!v.isGenericDict()) s.wrong("milestones", v, "a dict of milestone to count");
    std::vector<int64_t> milestones;
    for (const auto& e : v.toGenericDict()) {
      if (!e.key().isInt() || !e.value().isInt() || e.value().toInt() < 0 || e.value().toInt() > 1000)
        fail(Status::IO, "lr scheduler state: 'milestones' is not a dict of milestone to count");
      for (int64_t k = 0; k < e.value().toInt(); ++k) milestones.push_back(e.key().toInt());
    }
    double gamma = s.number("gamma");
    if (apply) spec_.milestones = milestones, spec_.gamma = gamma;
  }
};

class ExponentialLR : public Chainable {
 public:
  using Chainable::Chainable;
  double get_lr() override { return is_initial_ ? lr() : lr() * spec_.gamma; }
  std::optional<double> closed_form_lr() const override {
    return base_lr_ * std::pow(spec_.gamma, static_cast<double>(last_epoch));
  }
  const char* name() const override { return "ExponentialLR"; }
  void own_state(Dict& d) const override { d.insert("gamma", spec_.gamma); }
  void own_load(const Saved& s, bool apply) override {
    double gamma = s.number("gamma");
    if (apply) spec_.gamma = gamma;
  }
};

class CosineAnnealingLR : public Chainable {
 public:
  using Chainable::Chainable;
  double get_lr() override {
    const double e = static_cast<double>(last_epoch), t = static_cast<double>(spec_.t_max), m = spec_.eta_min;
    if (is_initial_) return lr();
    if (step_count_ == 1 && last_epoch > 0) return m + (base_lr_ - m) * (1 + std::cos(e * kPi / t)) / 2;
    if (restarts_a_period(last_epoch, spec_.t_max))
      return lr() + (base_lr_ - m) * (1 - std::cos(kPi / t)) / 2;
    return (1 + std::cos(kPi * e / t)) / (1 + std::cos(kPi * (e - 1) / t)) * (lr() - m) + m;
  }
  std::optional<double> closed_form_lr() const override {
    const double e = static_cast<double>(last_epoch), t = static_cast<double>(spec_.t_max), m = spec_.eta_min;
    return m + (base_lr_ - m) * (1 + std::cos(kPi * e / t)) / 2;
  }
  // PyTorch's (last_epoch - 1 - T_max) % (2 * T_max) == 0, in Python's ints:
  // here 2 * T_max overflows past 2^62 (T_max may be any positive int64).
  // Both sides taken modulo T_max first: e - 1 = T_max (mod 2 T_max) exactly
  // when e - 1 is an odd multiple of T_max.
  static bool restarts_a_period(int64_t e, int64_t t_max) {
    const int64_t r = e - 1;  // |e| <= 2^62 (steps are counted, loads checked)
    if (r % t_max != 0) return false;
    const int64_t q = r / t_max;
    return q % 2 != 0;
  }
  const char* name() const override { return "CosineAnnealingLR"; }
  void own_state(Dict& d) const override {
    d.insert("T_max", spec_.t_max);
    d.insert("eta_min", spec_.eta_min);
  }
  void own_load(const Saved& s, bool apply) override {
    int64_t t_max = s.positive("T_max");
    double eta_min = s.number("eta_min");
    if (apply) spec_.t_max = t_max, spec_.eta_min = eta_min;
  }
};

class LinearLR : public Chainable {
 public:
  using Chainable::Chainable;
  double get_lr() override {
    const double s = spec_.start_factor, f = spec_.end_factor;
    if (last_epoch == 0) return lr() * s;
    if (is_initial_ || last_epoch > spec_.total_iters) return lr();
    return lr() * (1.0 + (f - s) / (static_cast<double>(spec_.total_iters) * s +
                                    static_cast<double>(last_epoch - 1) * (f - s)));
  }
  std::optional<double> closed_form_lr() const override {
    const double s = spec_.start_factor, f = spec_.end_factor;
    return base_lr_ * (s + (f - s) * static_cast<double>(std::min(spec_.total_iters, last_epoch)) /
                               static_cast<double>(spec_.total_iters));
  }
  const char* name() const override { return "LinearLR"; }
  void own_state(Dict& d) const override {
    d.insert("start_factor", spec_.start_factor);
    d.insert("end_factor", spec_.end_factor);
    d.insert("total_iters", spec_.total_iters);
  }
  void own_load(const Saved& s, bool apply) override {
    double start = s.number("start_factor"), end = s.number("end_factor");
    int64_t total = s.positive("total_iters");
    if (apply) spec_.start_factor = start, spec_.end_factor = end, spec_.total_iters = total;
  }
};

class OneCycleLR : public Chainable {
 public:
  OneCycleLR(const SchedulerSpec& spec, std::shared_ptr<Optimizer> opt) : Chainable(spec, prepare(spec, opt)) {
    const double total = static_cast<double>(spec.total_steps);
    if (spec.three_phase)
      phases_ = {{spec.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
                 {2 * spec.pct_start * total - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"},
                 {total - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"}};
    else
      phases_ = {{spec.pct_start * total - 1, "initial_lr", "max_lr", "max_momentum", "base_momentum"},
                 {total - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"}};
  }
  // What OneCycleLR's constructor puts in the param_group before LRScheduler's.
  static std::shared_ptr<Optimizer> prepare(const SchedulerSpec& s, std::shared_ptr<Optimizer> opt) {
    for (size_t i = 0; i < opt->num_groups(); ++i) {
      auto& g = opt->group_extras(i);
      g["initial_lr"] = s.max_lr / s.div_factor;
      g["max_lr"] = s.max_lr;
      g["min_lr"] = g["initial_lr"] / s.final_div_factor;
      if (s.cycle_momentum) {
        opt->set_group_momentum(i, s.max_momentum);
        g["max_momentum"] = s.max_momentum;
        g["base_momentum"] = s.base_momentum;
      }
    }
    return opt;
  }
  double anneal(double start, double end, double pct) const {
    if (spec_.anneal_cos) return end + (start - end) / 2.0 * (std::cos(kPi * pct) + 1);
    return (end - start) * pct + start;
  }
  double get_lr() override {
    const int64_t step = last_epoch;
    if (step > spec_.total_steps)
      fail(Status::State, "OneCycleLR: tried to step " + std::to_string(step) + " times; total_steps is " +
                              std::to_string(spec_.total_steps));
    auto& g = optimizer_->group_extras(group_);
    double start_step = 0, lr = 0;
    for (size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (static_cast<double>(step) <= p.end_step || i == phases_.size() - 1) {
        double pct = (static_cast<double>(step) - start_step) / (p.end_step - start_step);
        lr = anneal(g[p.start_lr], g[p.end_lr], pct);
        if (spec_.cycle_momentum) optimizer_->set_group_momentum(group_, anneal(g[p.start_m], g[p.end_m], pct));
        break;
      }
      start_step = p.end_step;
    }
    return lr;
  }
  const char* name() const override { return "OneCycleLR"; }
  void own_state(Dict& d) const override {
    d.insert("total_steps", spec_.total_steps);
    c10::impl::GenericList phases(c10::AnyType::get());
    for (const auto& p : phases_) {
      Dict e = new_dict();
      // Python keeps the last phase's end as an int (total_steps - 1).
      if (&p == &phases_.back()) e.insert("end_step", static_cast<int64_t>(p.end_step));
      else e.insert("end_step", p.end_step);
      e.insert("start_lr", p.start_lr);
      e.insert("end_lr", p.end_lr);
      e.insert("start_momentum", p.start_m);
      e.insert("end_momentum", p.end_m);
      phases.push_back(e);
    }
    d.insert("_schedule_phases", phases);
    d.insert("_anneal_func_type", std::string(spec_.anneal_cos ? "cos" : "linear"));
    d.insert("cycle_momentum", spec_.cycle_momentum);
    d.insert("use_beta1", optimizer_->spec().kind != OptimizerSpec::Kind::Sgd);
  }
  void own_load(const Saved& s, bool apply) override {
    int64_t total = s.positive("total_steps");
    std::string anneal = s.text("_anneal_func_type");
    if (anneal != "cos" && anneal != "linear") fail(Status::IO, "lr scheduler state: _anneal_func_type '" + anneal + "'");
    bool cycle = s.flag("cycle_momentum");
    std::vector<Phase> phases;
    for (const auto& e : s.list("_schedule_phases").toListRef()) {
      Saved p(e, "OneCycleLR phase");
      auto key = [&](const char* k) {
        std::string v = p.text(k);
        static const char* known[] = {"initial_lr", "max_lr", "min_lr", "max_momentum", "base_momentum"};
        if (std::none_of(std::begin(known), std::end(known), [&](const char* n) { return v == n; }))
          fail(Status::IO, "lr scheduler state: a phase's " + std::string(k) + " is '" + v + "'");
        return v;
      };
      phases.push_back({p.number("end_step"), key("start_lr"), key("end_lr"), key("start_momentum"), key("end_momentum")});
    }
    if (phases.size() != 2 && phases.size() != 3) fail(Status::IO, "lr scheduler state: OneCycleLR has 2 or 3 phases");
    if (apply) spec_.total_steps = total, spec_.anneal_cos = anneal == "cos", spec_.cycle_momentum = cycle, phases_ = phases;
  }

 private:
  struct Phase {
    double end_step;
    std::string start_lr, end_lr, start_m, end_m;
  };
  std::vector<Phase> phases_;
};

class SequentialLR : public LrScheduler {
 public:
  SequentialLR(const SchedulerSpec& spec, std::shared_ptr<Optimizer> opt, std::vector<std::shared_ptr<LrScheduler>> c)
      : LrScheduler(spec, std::move(opt)), children_(std::move(c)) {}
  // PyTorch's constructor: back to the initial rate, every child one epoch
  // back, and the first child's initial step again.
  void start() {
    last_epoch = 0;
    for (size_t g = 0; g < optimizer_->num_groups(); ++g)
      optimizer_->set_group_lr(g, optimizer_->group_extras(g).at("initial_lr"));
    undo(*this);
    children_[0]->initial_step();
    last_lrs_ = children_[0]->last_lrs();
  }
  static void undo(LrScheduler& s) {
    if (auto* seq = dynamic_cast<SequentialLR*>(&s)) {
      for (auto& c : seq->children_) undo(*c);
    } else {
      s.last_epoch -= 1;
    }
  }
  void step() override {
    last_epoch += 1;
    const auto& m = spec_.milestones;
    size_t idx = static_cast<size_t>(std::upper_bound(m.begin(), m.end(), last_epoch) - m.begin());
    auto& s = *children_[idx];
    if (idx > 0 && m[idx - 1] == last_epoch) s.update_lr(0);
    else s.step();
    last_lrs_ = s.last_lrs();
  }
  double get_lr() override { return optimizer_->group_lr(group_); }
  c10::IValue state_dict() const override {
    Dict d = new_dict();
    c10::impl::GenericList milestones(c10::AnyType::get());
    for (int64_t e : spec_.milestones) milestones.push_back(e);
    d.insert("_milestones", milestones);
    d.insert("last_epoch", last_epoch);
    d.insert("_last_lr", list_of(last_lrs_));
    c10::impl::GenericList children(c10::AnyType::get());
    for (const auto& c : children_) children.push_back(c->state_dict());
    d.insert("_schedulers", children);
    return d;
  }
  void check_state_dict(const c10::IValue& v) const override {
    Saved s(v, "SequentialLR");
    s.counter("last_epoch");
    s.per_group("_last_lr", optimizer_->num_groups());
    const auto& children = s.list("_schedulers").toListRef();
    if (children.size() != children_.size())
      fail(Status::IO, "lr scheduler state: SequentialLR of " + std::to_string(children.size()) + " schedulers, this one " +
                           std::to_string(children_.size()));
    for (size_t i = 0; i < children.size(); ++i) children_[i]->check_state_dict(children[i]);
    if (s.list("_milestones").toListRef().size() != spec_.milestones.size())
      fail(Status::IO, "lr scheduler state: SequentialLR's _milestones differ in number");
    for (const auto& e : s.list("_milestones").toListRef())
      if (!e.isInt()) fail(Status::IO, "lr scheduler state: a milestone is a " + e.tagKind());
  }
  void load_state_dict(const c10::IValue& v) override {
    check_state_dict(v);
    Saved s(v, "SequentialLR");
    last_epoch = s.counter("last_epoch");
    last_lrs_ = s.per_group("_last_lr", optimizer_->num_groups());
    spec_.milestones.clear();
    for (const auto& e : s.list("_milestones").toListRef()) spec_.milestones.push_back(e.toInt());
    const auto& children = s.list("_schedulers").toListRef();
    for (size_t i = 0; i < children.size(); ++i) children_[i]->load_state_dict(children[i]);
  }

 private:
  std::vector<std::shared_ptr<LrScheduler>> children_;
};

class ReduceLROnPlateau : public LrScheduler {
 public:
  ReduceLROnPlateau(const SchedulerSpec& spec, std::shared_ptr<Optimizer> opt) : LrScheduler(spec, std::move(opt)) {
    last_epoch = 0;
    record_last_lrs();
    best_ = worse();
  }
  double worse() const {
    return spec_.mode_max ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
  }
  bool better(double a, double best) const {
    if (!spec_.mode_max && !spec_.threshold_abs) return a < best * (1.0 - spec_.threshold);
    if (!spec_.mode_max) return a < best - spec_.threshold;
    if (!spec_.threshold_abs) return a > best * (spec_.threshold + 1.0);
    return a > best + spec_.threshold;
  }
  void step() override { fail(Status::InvalidArgument, "ReduceLROnPlateau: step needs the metric"); }
  void step(double metric) override {
    last_epoch += 1;
    if (better(metric, best_)) {
      best_ = metric;
      bad_epochs_ = 0;
    } else {
      bad_epochs_ += 1;
    }
    if (cooldown_counter_ > 0) {
      cooldown_counter_ -= 1;
      bad_epochs_ = 0;
    }
    if (bad_epochs_ > spec_.patience) {
      for (size_t g = 0; g < optimizer_->num_groups(); ++g) {
        double old_lr = optimizer_->group_lr(g);
        double new_lr = std::max(old_lr * spec_.factor, spec_.min_lr);
        if (old_lr - new_lr > spec_.eps) optimizer_->set_group_lr(g, new_lr);
      }
      cooldown_counter_ = spec_.cooldown;
      bad_epochs_ = 0;
    }
    record_last_lrs();
  }
  double get_lr() override { return optimizer_->group_lr(group_); }
  c10::IValue state_dict() const override {
    Dict d = new_dict();
    d.insert("factor", spec_.factor);
    d.insert("default_min_lr", spec_.min_lr);
    d.insert("min_lrs", list_of(std::vector<double>(optimizer_->num_groups(), spec_.min_lr)));
    d.insert("patience", spec_.patience);
    d.insert("cooldown", spec_.cooldown);
    d.insert("eps", spec_.eps);
    d.insert("last_epoch", last_epoch);
    d.insert("_last_lr", list_of(last_lrs_));
    d.insert("mode_worse", worse());
    d.insert("mode", std::string(spec_.mode_max ? "max" : "min"));
    d.insert("threshold", spec_.threshold);
    d.insert("threshold_mode", std::string(spec_.threshold_abs ? "abs" : "rel"));
    d.insert("best", best_);
    d.insert("cooldown_counter", cooldown_counter_);
    d.insert("num_bad_epochs", bad_epochs_);
    return d;
  }
  struct Values {
    SchedulerSpec spec;
    int64_t last_epoch, cooldown_counter, bad_epochs;
    std::vector<double> last_lrs;
    double best;
  };
  Values read(const c10::IValue& v) const {
    Saved s(v, "ReduceLROnPlateau");
    const size_t groups = optimizer_->num_groups();
    Values out{spec_, s.counter("last_epoch"), s.counter("cooldown_counter"), s.counter("num_bad_epochs"),
               s.per_group("_last_lr", groups), s.number("best")};
    out.spec.factor = s.number("factor");
    // libddp keeps one min_lr for every group (PyTorch's scalar argument).
    std::vector<double> min_lrs = s.per_group("min_lrs", groups);
    if (std::adjacent_find(min_lrs.begin(), min_lrs.end(), std::not_equal_to<double>()) != min_lrs.end())
      fail(Status::IO, "lr scheduler state: ReduceLROnPlateau's min_lrs differ between groups (libddp keeps one)");
    out.spec.min_lr = min_lrs.front();
    out.spec.patience = s.integer("patience");
    out.spec.cooldown = s.integer("cooldown");
    out.spec.eps = s.number("eps");
    out.spec.threshold = s.number("threshold");
    std::string mode = s.text("mode"), tmode = s.text("threshold_mode");
    if ((mode != "min" && mode != "max") || (tmode != "rel" && tmode != "abs"))
      fail(Status::IO, "lr scheduler state: mode '" + mode + "', threshold_mode '" + tmode + "'");
    out.spec.mode_max = mode == "max";
    out.spec.threshold_abs = tmode == "abs";
    return out;
  }
  void check_state_dict(const c10::IValue& v) const override { read(v); }
  void load_state_dict(const c10::IValue& v) override {
    Values r = read(v);
    spec_ = r.spec;
    last_epoch = r.last_epoch;
    cooldown_counter_ = r.cooldown_counter;
    bad_epochs_ = r.bad_epochs;
    last_lrs_ = r.last_lrs;
    best_ = r.best;
  }

 private:
  double best_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t bad_epochs_ = 0;
};

void check_spec(const SchedulerSpec& s, const Optimizer& opt, const std::vector<std::shared_ptr<LrScheduler>>& children) {
  using K = SchedulerSpec::Kind;
  auto positive = [](int64_t v, const char* name) {
    check_arg(v > 0, std::string("lr scheduler: ") + name + " " + std::to_string(v) + " is not positive");
  };
  switch (s.kind) {
    case K::Step: positive(s.step_size, "step_size"); break;
    case K::MultiStep: break;
    case K::Exponential: break;
    case K::CosineAnnealing: positive(s.t_max, "T_max"); break;
    case K::Linear:
      check_arg(s.start_factor > 0 && s.start_factor <= 1, "lr scheduler: start_factor must be in (0, 1]");
      check_arg(s.end_factor >= 0 && s.end_factor <= 1, "lr scheduler: end_factor must be in [0, 1]");
      positive(s.total_iters, "total_iters");
      break;
    case K::OneCycle:
      positive(s.total_steps, "total_steps");
      check_arg(s.max_lr > 0, "lr scheduler: OneCycleLR's max_lr must be positive");
      check_arg(s.pct_start >= 0 && s.pct_start <= 1, "lr scheduler: pct_start must be in [0, 1]");
      check_arg(s.div_factor > 0 && s.final_div_factor > 0, "lr scheduler: div factors must be positive");
      break;
    case K::Sequential:
      check_arg(!children.empty(), "lr scheduler: SequentialLR needs at least one scheduler");
      check_arg(s.milestones.size() + 1 == children.size(),
                "lr scheduler: SequentialLR needs one milestone fewer than schedulers (" +
                    std::to_string(children.size()) + " schedulers, " + std::to_string(s.milestones.size()) +
                    " milestones)");
      for (const auto& c : children) {
        check_arg(c != nullptr, "lr scheduler: SequentialLR was given a NULL scheduler");
        check_arg(c->optimizer().get() == &opt, "lr scheduler: SequentialLR's schedulers must share its optimizer");
        check_arg(c->spec().kind != K::ReduceOnPlateau, "lr scheduler: SequentialLR cannot hold ReduceLROnPlateau");
      }
      check_arg(std::is_sorted(s.milestones.begin(), s.milestones.end()), "lr scheduler: milestones must be sorted");
      break;
    case K::ReduceOnPlateau:
      check_arg(s.factor < 1.0, "lr scheduler: ReduceLROnPlateau's factor must be < 1.0");
      break;
  }
}

}  // namespace

LrScheduler::LrScheduler(const SchedulerSpec& spec, std::shared_ptr<Optimizer> optimizer)
    : spec_(spec), optimizer_(std::move(optimizer)) {
  last_lrs_.assign(optimizer_->num_groups(), 0.0);
  if (spec.kind == SchedulerSpec::Kind::ReduceOnPlateau || spec.kind == SchedulerSpec::Kind::Sequential) return;
  // LRScheduler's constructor (last_epoch -1): group.setdefault('initial_lr', lr), each group.
  for (size_t g = 0; g < optimizer_->num_groups(); ++g) {
    auto& extras = optimizer_->group_extras(g);
    if (!extras.count("initial_lr")) extras["initial_lr"] = optimizer_->group_lr(g);
    base_lrs_.push_back(extras["initial_lr"]);
  }
}

void LrScheduler::record_last_lrs() {
  last_lrs_.resize(optimizer_->num_groups());
  for (size_t g = 0; g < last_lrs_.size(); ++g) last_lrs_[g] = optimizer_->group_lr(g);
}

void LrScheduler::initial_step() {
  step_count_ = 0;
  is_initial_ = true;
  try {
    step();
  } catch (...) {
    is_initial_ = false;
    throw;
  }
  is_initial_ = false;
}

void LrScheduler::step() {
  step_count_ += 1;
  update_lr(std::nullopt);
}

void LrScheduler::step(double) {
  fail(Status::InvalidArgument, "lr scheduler: only ReduceLROnPlateau steps on a metric");
}

void LrScheduler::update_lr(std::optional<int64_t> epoch) {
  if (!epoch) last_epoch += 1;
  else last_epoch = *epoch;
  // Each group's rate from its own current rate and base rate, as
  // PyTorch's get_lr() computes its list.
  for (size_t g = 0; g < optimizer_->num_groups(); ++g) {
    group_ = g;
    base_lr_ = base_lrs_.at(g);
    double lr;
    if (!epoch) {
      lr = get_lr();
    } else {
      auto closed = closed_form_lr();
      lr = closed ? *closed : get_lr();
    }
    optimizer_->set_group_lr(g, lr);
  }
  group_ = 0;
  record_last_lrs();
}

c10::IValue LrScheduler::state_dict() const { return c10::IValue(); }
void LrScheduler::check_state_dict(const c10::IValue&) const {}
void LrScheduler::load_state_dict(const c10::IValue&) {}

std::unique_ptr<LrScheduler> LrScheduler::make(const SchedulerSpec& spec, std::shared_ptr<Optimizer> optimizer,
                                               std::vector<std::shared_ptr<LrScheduler>> children) {
  check_arg(optimizer != nullptr, "lr scheduler: no optimizer");
  check_spec(spec, *optimizer, children);
  using K = SchedulerSpec::Kind;
  std::unique_ptr<LrScheduler> s;
  switch (spec.kind) {
    case K::Step: s.reset(new StepLR(spec, optimizer)); break;
    case K::MultiStep: s.reset(new MultiStepLR(spec, optimizer)); break;
    case K::Exponential: s.reset(new ExponentialLR(spec, optimizer)); break;
    case K::CosineAnnealing: s.reset(new CosineAnnealingLR(spec, optimizer)); break;
    case K::Linear: s.reset(new LinearLR(spec, optimizer)); break;
    case K::OneCycle: s.reset(new OneCycleLR(spec, optimizer)); break;
    case K::Sequential: {
      auto* seq = new SequentialLR(spec, optimizer, std::move(children));
      s.reset(seq);
      seq->start();
      return s;
    }
    case K::ReduceOnPlateau: return std::unique_ptr<LrScheduler>(new ReduceLROnPlateau(spec, optimizer));
  }
  s->initial_step();
  return s;
}

}  // namespace ddp::core
