// torch.optim.lr_scheduler's schedulers over one optimizer, with PyTorch's
// own (chainable) formulas, step for step, so that a run gives the learning
// rates Python gives, and their state_dict() layout, so that a checkpoint
// carries them to and from PyTorch and Lightning. The caller steps them per
// epoch or per optimizer step (Lightning's "interval"), after the
// optimizer's step, as PyTorch asks.
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "model/optimizer.h"

namespace ddp::core {

struct SchedulerSpec {
  enum class Kind { Step, MultiStep, Exponential, CosineAnnealing, Linear, OneCycle, Sequential, ReduceOnPlateau } kind;
  // StepLR: step_size, gamma; MultiStepLR: milestones, gamma; ExponentialLR: gamma.
  int64_t step_size = 1;
  std::vector<int64_t> milestones;  // MultiStepLR; SequentialLR: where each next scheduler takes over
  double gamma = 0.1;
  // CosineAnnealingLR.
  int64_t t_max = 1;
  double eta_min = 0;
  // LinearLR.
  double start_factor = 1.0 / 3;
  double end_factor = 1.0;
  int64_t total_iters = 5;
  // OneCycleLR (total_steps, or epochs x steps_per_epoch).
  double max_lr = 0;
  int64_t total_steps = 0;
  double pct_start = 0.3;
  bool anneal_cos = true;  // anneal_strategy "cos", else "linear"
  bool cycle_momentum = true;
  double base_momentum = 0.85;
  double max_momentum = 0.95;
  double div_factor = 25;
  double final_div_factor = 1e4;
  bool three_phase = false;
  // ReduceLROnPlateau.
  bool mode_max = false;  // mode "max", else "min"
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  bool threshold_abs = false;  // threshold_mode "abs", else "rel"
  int64_t cooldown = 0;
  double min_lr = 0;
  double eps = 1e-8;
};

class LrScheduler {
 public:
  // Makes a scheduler over `optimizer`, which then has the first learning
  // rate of the schedule (as PyTorch's constructor leaves it). A
  // SequentialLR takes `children`, made over the same optimizer before it.
  // Status::InvalidArgument names a bad argument, with PyTorch's checks.
  static std::unique_ptr<LrScheduler> make(const SchedulerSpec& spec, std::shared_ptr<Optimizer> optimizer,
                                           std::vector<std::shared_ptr<LrScheduler>> children = {});
  virtual ~LrScheduler() = default;

  // scheduler.step(): the next learning rate. ReduceLROnPlateau refuses it
  // (it needs a metric).
  virtual void step();
  // ReduceLROnPlateau's step(metric); the others refuse it.
  virtual void step(double metric);
  // get_last_lr()[0], and of group `g`.
  double last_lr() const { return last_lrs_.at(0); }
  double last_lr(size_t g) const { return last_lrs_.at(g); }
  const std::vector<double>& last_lrs() const { return last_lrs_; }
  const SchedulerSpec& spec() const { return spec_; }
  const std::shared_ptr<Optimizer>& optimizer() const { return optimizer_; }

  // state_dict() as PyTorch's scheduler of this kind writes it.
  virtual c10::IValue state_dict() const;
  // Status::IO naming the first entry that does not fit (another kind of
  // scheduler, a missing entry, a value of the wrong type).
  virtual void check_state_dict(const c10::IValue& saved) const;
  // After check_state_dict; nothing changes unless every entry is good.
  virtual void load_state_dict(const c10::IValue& saved);

  // For SequentialLR, which drives its children as PyTorch's does.
  void initial_step();
  void update_lr(std::optional<int64_t> epoch);
  int64_t last_epoch = -1;

  // For make() and the kinds; an LrScheduler comes from make().
  LrScheduler(const SchedulerSpec& spec, std::shared_ptr<Optimizer> optimizer);

 protected:
  // get_lr() for the group `group_`: the chainable form, from the group's
  // current rate and `base_lr_`, its base rate (PyTorch computes each
  // group's rate from that group's alone).
  virtual double get_lr() = 0;
  // _get_closed_form_lr(), where PyTorch's scheduler has one.
  virtual std::optional<double> closed_form_lr() const { return std::nullopt; }
  // Records every group's rate as the last one (get_last_lr()).
  void record_last_lrs();

  SchedulerSpec spec_;
  std::shared_ptr<Optimizer> optimizer_;
  std::vector<double> base_lrs_;  // one per param group
  size_t group_ = 0;              // the group get_lr works on
  double base_lr_ = 0;            // base_lrs_[group_] while get_lr runs
  int64_t step_count_ = 0;
  bool is_initial_ = false;
  std::vector<double> last_lrs_;
};

}  // namespace ddp::core
