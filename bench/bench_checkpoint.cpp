// Saving and loading a checkpoint of 100 M float32 parameters with Adam's
// state (1.2 GB), the way the strategy's rank 0 does it: Lightning's layout
// in PyTorch's format, streamed to a temporary file, fsync, rename; loaded
// with every record's CRC checked, then the optimizer's state checked and
// loaded and the parameters copied in. bench/run_checkpoint.sh runs it beside
// torch.save / torch.load of the same state (bench_checkpoint_torch.py).
// Prints one line per phase: seconds, the peak resident memory above what
// was resident before it (VmHWM, reset through /proc/self/clear_refs: it
// counts the pages of a mapped file too), and the peak of anonymous memory
// above it (RssAnon sampled every millisecond: what the process itself
// holds, without the page cache of a mapped file).
//   bench_checkpoint PATH [parameters, default 100000000]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/lightning_checkpoint.h"
#include "model/optimizer.h"

using namespace ddp::core;

namespace {

long status_kb(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field, 0) == 0) return std::atol(line.c_str() + std::strlen(field));
  return -1;
}

// Resets the peak to the current resident size; returns that size.
long reset_peak() {
  std::ofstream("/proc/self/clear_refs") << "5";
  return status_kb("VmRSS:");
}

template <typename F>
void phase(const char* name, F&& body) {
  long before = reset_peak();
  long anon_before = status_kb("RssAnon:");
  std::atomic<bool> done{false};
  std::atomic<long> anon_peak{anon_before};
  std::thread sampler([&] {
    while (!done) {
      long a = status_kb("RssAnon:");
      if (a > anon_peak) anon_peak = a;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  auto t0 = std::chrono::steady_clock::now();
  body();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  sampler.join();
  std::printf("%s %.3f s, peak +%.1f MB, anon +%.1f MB\n", name, s, (status_kb("VmHWM:") - before) / 1024.0,
              (anon_peak - anon_before) / 1024.0);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH [parameters]\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  const int64_t total = argc > 2 ? std::atoll(argv[2]) : 100000000;
  at::set_num_threads(1);
  // Ten tensors, as a model's layers; Adam's state after one step.
  std::vector<at::Tensor> params;
  for (int i = 0; i < 10; ++i) params.push_back(at::randn({total / 10}).requires_grad_());
  OptimizerSpec spec;
  spec.kind = OptimizerSpec::Kind::Adam;
  auto opt = Optimizer::make(spec, params);
  for (auto& p : params) p.mutable_grad() = at::ones_like(p);
  opt->step();
  auto io = file_checkpoint_io();
  // What the strategy's rank 0 writes for this model and optimizer.
  auto contents = [&] {
    LightningCheckpoint c;
    c.epoch = 1;
    c.global_step = 1;
    for (size_t i = 0; i < params.size(); ++i) c.state_dict.push_back({"layer" + std::to_string(i) + ".weight", params[i]});
    c.optimizer_states.push_back(opt->state_dict());
    return c;
  };
  phase("save", [&] {
    LightningCheckpoint c = contents();
    io->save_streamed([&](const ByteSink& sink) { write_lightning_checkpoint(c, sink); }, path);
  });
  // BENCH_NULL_SINK: the encoding alone (pickling, CRCs), without the file.
  if (std::getenv("BENCH_NULL_SINK")) {
    phase("encode only", [&] { write_lightning_checkpoint(contents(), [](const void*, size_t) {}); });
  }
  phase("load", [&] {
    LightningCheckpoint c = read_lightning_checkpoint(io->open(path), path);
    opt->check_state_dict(c.optimizer_states.at(0));
    opt->load_state_dict(c.optimizer_states.at(0));
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(c.state_dict.at(i).tensor);
  });
  return 0;
}
