// libddp's learning-rate schedulers stepped over a parameter-free schedule,
// for tests/parity/test_lr_scheduler_parity.py: prints the learning rate
// after construction and after each step (%.17g), and at step RESTORE saves
// the optimizer's and scheduler's state_dict to FILE (a torch.save file),
// builds both afresh, loads them back (Lightning's order: optimizer first)
// and goes on. Python's torch.optim.lr_scheduler does the same. With
// LR_TRACE_RESUME_FROM=FILE, the state loaded at RESTORE is FILE's (what
// PyTorch saved at that step) instead of its own.
//
//   lr_schedule_trace KIND STEPS RESTORE FILE [sgd|adamw] [key=value ...]
// KIND: step multistep exponential cosine linear onecycle sequential plateau
// (sequential: LinearLR(start_factor, total_iters) then CosineAnnealingLR(t_max));
// plateau is fed the metric 1 / (1 + (k % 7)) at step k.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/torch_archive.h"
#include "common/error.h"
#include "model/lr_scheduler.h"

using namespace ddp::core;

namespace {

struct Run {
  std::shared_ptr<Optimizer> opt;
  std::vector<std::shared_ptr<LrScheduler>> parts;
  std::shared_ptr<LrScheduler> sched;
};

Run make(const std::string& kind, const std::map<std::string, std::string>& kv, bool adamw) {
  auto num = [&](const char* k, double d) { return kv.count(k) ? std::atof(kv.at(k).c_str()) : d; };
  auto integer = [&](const char* k, int64_t d) { return kv.count(k) ? std::atoll(kv.at(k).c_str()) : d; };
  OptimizerSpec os;
  os.kind = adamw ? OptimizerSpec::Kind::AdamW : OptimizerSpec::Kind::Sgd;
  os.lr = num("lr", 0.1);
  os.momentum = adamw ? 0 : 0.9;
  os.weight_decay = adamw ? 0.01 : 0;
  Run r;
  if (integer("groups", 1) == 2) {
    // [{"params": [p]}, {"params": [q], "lr": 0.03}]: each group follows
    // the schedule from its own rate.
    std::vector<ParamGroup> groups(2);
    groups[0].params = {at::zeros({2}).requires_grad_()};
    groups[1].params = {at::zeros({3}).requires_grad_()};
    groups[1].lr = 0.03;
    r.opt = Optimizer::make(os, groups);
  } else {
    r.opt = Optimizer::make(os, {at::zeros({2}).requires_grad_()});
  }
  SchedulerSpec s;
  using K = SchedulerSpec::Kind;
  s.step_size = integer("step_size", 30);
  s.gamma = num("gamma", 0.1);
  s.t_max = integer("t_max", 100);
  s.eta_min = num("eta_min", 0);
  s.start_factor = num("start_factor", 1.0 / 3);
  s.end_factor = num("end_factor", 1.0);
  s.total_iters = integer("total_iters", 5);
  s.max_lr = num("max_lr", 1.0);
  s.total_steps = integer("total_steps", 1000);
  s.pct_start = num("pct_start", 0.3);
  s.anneal_cos = integer("linear", 0) == 0;
  s.three_phase = integer("three_phase", 0) != 0;
  s.factor = num("factor", 0.5);
  s.patience = integer("patience", 3);
  s.cooldown = integer("cooldown", 2);
  s.mode_max = integer("mode_max", 0) != 0;
  if (kind == "multistep") s.milestones = {100, 300, 300, 700};
  static const std::map<std::string, K> kinds = {
      {"step", K::Step},           {"multistep", K::MultiStep}, {"exponential", K::Exponential},
      {"cosine", K::CosineAnnealing}, {"linear", K::Linear},    {"onecycle", K::OneCycle},
      {"plateau", K::ReduceOnPlateau}};
  if (kind == "sequential") {
    SchedulerSpec lin = s, cos = s;
    lin.kind = K::Linear;
    cos.kind = K::CosineAnnealing;
    r.parts.push_back(LrScheduler::make(lin, r.opt));
    r.parts.push_back(LrScheduler::make(cos, r.opt));
    SchedulerSpec seq;
    seq.kind = K::Sequential;
    seq.milestones = {s.total_iters};
    r.sched = LrScheduler::make(seq, r.opt, r.parts);
  } else {
    s.kind = kinds.at(kind);
    r.sched = LrScheduler::make(s, r.opt);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s KIND STEPS RESTORE FILE [sgd|adamw] [key=value ...]\n", argv[0]);
    return 2;
  }
  try {
    std::string kind = argv[1];
    int steps = std::atoi(argv[2]), restore = std::atoi(argv[3]);
    std::string file = argv[4];
    bool adamw = argc > 5 && std::string(argv[5]) == "adamw";
    std::map<std::string, std::string> kv;
    for (int i = 6; i < argc; ++i) {
      std::string a = argv[i];
      auto eq = a.find('=');
      if (eq != std::string::npos) kv[a.substr(0, eq)] = a.substr(eq + 1);
    }
    Run r = make(kind, kv, adamw);
    // Every group's rate, on one line.
    auto print = [&] {
      for (size_t g = 0; g < r.opt->num_groups(); ++g) std::printf(g ? " %.17g" : "%.17g", r.opt->group_lr(g));
      std::printf("\n");
    };
    print();
    for (int k = 0; k < steps; ++k) {
      if (k == restore) {
        c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
        d.insert("optimizer", r.opt->state_dict());
        d.insert("scheduler", r.sched->state_dict());
        write_file_atomically(file, [&](const ByteSink& sink) { write_torch_archive(d, sink); });
        const char* theirs = std::getenv("LR_TRACE_RESUME_FROM");
        const std::string from = theirs ? theirs : file;
        c10::IValue back = read_torch_archive(file_checkpoint_io()->open(from), from);
        r = make(kind, kv, adamw);
        r.opt->load_state_dict(back.toGenericDict().at("optimizer"));
        r.sched->load_state_dict(back.toGenericDict().at("scheduler"));
      }
      if (kind == "plateau") r.sched->step(1.0 / (1 + (k % 7)));
      else r.sched->step();
      print();
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lr_schedule_trace: %s\n", e.what());
    return 1;
  }
  return 0;
}
