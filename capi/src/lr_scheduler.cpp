// Learning-rate schedulers: argument translation, then core/model.
#include "ddp/model.h"

#include <cstring>

#include "handles.h"
#include "model/lr_scheduler.h"
#include "model/optimizer.h"

using namespace ddp::capi;

ddp_lr_scheduler::~ddp_lr_scheduler() = default;

namespace {

ddp::core::SchedulerSpec spec_of(const ddp_lr_scheduler_options& o) {
  if (o.version != DDP_LR_SCHEDULER_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_lr_scheduler_new: unknown options version " + std::to_string(o.version));
  using K = ddp::core::SchedulerSpec::Kind;
  ddp::core::SchedulerSpec s;
  // Read as the int a caller may have put there: an out-of-range value in
  // the enum itself would be undefined behaviour.
  int kind = 0;
  static_assert(sizeof kind == sizeof o.kind, "ddp_lr_scheduler_kind is an int");
  std::memcpy(&kind, &o.kind, sizeof kind);
  switch (kind) {
    case DDP_LR_STEP: s.kind = K::Step; break;
    case DDP_LR_MULTI_STEP: s.kind = K::MultiStep; break;
    case DDP_LR_EXPONENTIAL: s.kind = K::Exponential; break;
    case DDP_LR_COSINE_ANNEALING: s.kind = K::CosineAnnealing; break;
    case DDP_LR_LINEAR: s.kind = K::Linear; break;
    case DDP_LR_ONE_CYCLE: s.kind = K::OneCycle; break;
    case DDP_LR_REDUCE_ON_PLATEAU: s.kind = K::ReduceOnPlateau; break;
    default: fail(DDP_E_INVALID_ARGUMENT, "ddp_lr_scheduler_new: unknown kind " + std::to_string(kind));
  }
  if (o.num_milestones > 0 && !o.milestones) fail(DDP_E_INVALID_ARGUMENT, "ddp_lr_scheduler_new: milestones is NULL");
  if (o.num_milestones > 100000) fail(DDP_E_INVALID_ARGUMENT, "ddp_lr_scheduler_new: too many milestones");
  s.milestones.assign(o.milestones, o.milestones + o.num_milestones);
  s.step_size = o.step_size;
  s.gamma = o.gamma;
  s.t_max = o.t_max;
  s.eta_min = o.eta_min;
  s.start_factor = o.start_factor;
  s.end_factor = o.end_factor;
  s.total_iters = o.total_iters;
  s.max_lr = o.max_lr;
  s.total_steps = o.total_steps;
  s.pct_start = o.pct_start;
  s.anneal_cos = o.anneal_linear == 0;
  s.cycle_momentum = o.cycle_momentum != 0;
  s.base_momentum = o.base_momentum;
  s.max_momentum = o.max_momentum;
  s.div_factor = o.div_factor;
  s.final_div_factor = o.final_div_factor;
  s.three_phase = o.three_phase != 0;
  s.mode_max = o.mode_max != 0;
  s.factor = o.factor;
  s.patience = o.patience;
  s.threshold = o.threshold;
  s.threshold_abs = o.threshold_abs != 0;
  s.cooldown = o.cooldown;
  s.min_lr = o.min_lr;
  s.eps = o.eps;
  return s;
}

}  // namespace

extern "C" {

ddp_status ddp_lr_scheduler_options_init(ddp_lr_scheduler_options* opts, unsigned int version,
                                         ddp_lr_scheduler_kind kind) {
  // The kind is checked after what every init function checks (NULL, the version).
  if (opts && version == DDP_LR_SCHEDULER_OPTIONS_VERSION && (kind < DDP_LR_STEP || kind > DDP_LR_REDUCE_ON_PLATEAU))
    return invalid("ddp_lr_scheduler_options_init: unknown kind " + std::to_string(static_cast<int>(kind)));
  return init_options(opts, version, DDP_LR_SCHEDULER_OPTIONS_VERSION,
                      ddp_lr_scheduler_options DDP_LR_SCHEDULER_OPTIONS_INIT(kind), "ddp_lr_scheduler_options_init");
}

ddp_status ddp_lr_scheduler_new(ddp_lr_scheduler** out, ddp_optimizer* opt, const ddp_lr_scheduler_options* o) {
  if (!out) return invalid("ddp_lr_scheduler_new: out is NULL");
  *out = nullptr;
  if (!o) return invalid("ddp_lr_scheduler_new: options is NULL (the kind is required)");
  return fence([&] {
    auto* h = require(opt, "optimizer");
    auto s = std::make_unique<ddp_lr_scheduler>();
    s->scheduler = ddp::core::LrScheduler::make(spec_of(*o), h->optimizer);
    hand_out(out, std::move(s));
  });
}

ddp_status ddp_lr_scheduler_new_sequential(ddp_lr_scheduler** out, ddp_optimizer* opt, ddp_lr_scheduler* const* scheds,
                                           size_t num_scheds, const int64_t* milestones) {
  if (!out) return invalid("ddp_lr_scheduler_new_sequential: out is NULL");
  *out = nullptr;
  if (num_scheds == 0 || !scheds) return invalid("ddp_lr_scheduler_new_sequential: no schedulers");
  if (num_scheds > 1 && !milestones) return invalid("ddp_lr_scheduler_new_sequential: milestones is NULL");
  return fence([&] {
    auto* h = require(opt, "optimizer");
    std::vector<std::shared_ptr<ddp::core::LrScheduler>> children;
    for (size_t i = 0; i < num_scheds; ++i) children.push_back(require(scheds[i], "scheduler")->scheduler);
    ddp::core::SchedulerSpec spec;
    spec.kind = ddp::core::SchedulerSpec::Kind::Sequential;
    spec.milestones.assign(milestones, milestones + (num_scheds - 1));
    auto s = std::make_unique<ddp_lr_scheduler>();
    s->scheduler = ddp::core::LrScheduler::make(spec, h->optimizer, std::move(children));
    hand_out(out, std::move(s));
  });
}

ddp_status ddp_lr_scheduler_step(ddp_lr_scheduler* s) {
  return fence([&] { require(s, "scheduler")->scheduler->step(); });
}

ddp_status ddp_lr_scheduler_step_metric(ddp_lr_scheduler* s, double metric) {
  return fence([&] { require(s, "scheduler")->scheduler->step(metric); });
}

ddp_status ddp_lr_scheduler_last_lr(const ddp_lr_scheduler* s, double* out) {
  if (!out) return invalid("ddp_lr_scheduler_last_lr: out is NULL");
  return fence([&] { *out = require(s, "scheduler")->scheduler->last_lr(); });
}

void ddp_lr_scheduler_free(ddp_lr_scheduler* s) { release(s); }

}  // extern "C"
