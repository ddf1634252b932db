// mp_worker soak (issue 27): SOAK_STEPS (default 1000) reducer steps under
// the comm hook SOAK_HOOK, with the reducer made anew every 50 steps with
// random bucket caps, random unused parameters (find_unused_parameters) and
// random no_sync windows; every synchronised step is checked against the
// all-reduce average computed here from every rank's gradients. PowerSGD
// approximates by design: its steps are checked for agreement between the
// ranks (and exactly before start_powersgd_iter). Rank 0 prints the growth
// of its fds, threads and RSS from step 100 to the end, and each rank checks
// it against the bounds: no fd, no thread, 32 MiB of RSS.
#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "worker_scenarios.h"
#include "worker_util.h"

using namespace worker;

namespace {

struct Usage {
  long fds = 0, threads = 0, rss_kib = 0;
};

Usage usage() {
  Usage u;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) u.fds += e->d_name[0] != '.';
    closedir(d);
  }
  std::ifstream st("/proc/self/status");
  std::string line;
  while (std::getline(st, line)) {
    if (line.rfind("Threads:", 0) == 0) u.threads = std::atol(line.c_str() + 8);
    if (line.rfind("VmRSS:", 0) == 0) u.rss_kib = std::atol(line.c_str() + 6);
  }
  return u;
}

// Averages in C where the bucket is float32; under a compression wrapper the
// bucket is a float16 copy, which the hook has no arithmetic for: MEAN then
// (the divisor is the group size here: no rank joins early).
// usage() once what a teardown ends in the background (a backend's threads
// and sockets, reclaimed asynchronously) had up to 3 s to finish: what is
// still there then has grown for good.
Usage settled_usage(const Usage& baseline) {
  Usage u = usage();
  for (int i = 0; i < 30 && (u.fds > baseline.fds || u.threads > baseline.threads); ++i) {
    usleep(100000);
    u = usage();
  }
  return u;
}

ddp_status averaging_c_hook(ddp_group* g, const ddp_comm_bucket* b, void*) {
  if (ddp_tensor_dtype(b->buffer) != DDP_FLOAT32) {
    if (b->divisor != ddp_group_size(g)) return DDP_E_INVALID_ARGUMENT;
    return ddp_all_reduce(g, b->buffer, DDP_MEAN);
  }
  ddp_status s = ddp_all_reduce(g, b->buffer, DDP_SUM);
  if (s != DDP_OK) return s;
  float* x = static_cast<float*>(ddp_tensor_data(b->buffer));
  for (int64_t i = 0; i < ddp_tensor_numel(b->buffer); ++i) x[i] /= static_cast<float>(b->divisor);
  return DDP_OK;
}

// Whether every rank of `g` holds the same finite checksum `h` (MIN and MAX
// agree); the two are returned for the message.
bool ranks_agree(ddp_group* g, double h, double* lo, double* hi) {
  *lo = *hi = h;
  ddp_tensor *tl = nullptr, *th = nullptr;
  WOK(ddp_tensor_from_blob(&tl, lo, DDP_FLOAT64, nullptr, 0));
  WOK(ddp_tensor_from_blob(&th, hi, DDP_FLOAT64, nullptr, 0));
  WOK(ddp_all_reduce(g, tl, DDP_MIN));
  WOK(ddp_all_reduce(g, th, DDP_MAX));
  ddp_tensor_free(tl);
  ddp_tensor_free(th);
  return *lo == *hi && std::isfinite(*lo);
}

struct Hook {
  ddp_comm_hook* hook = nullptr;
  bool exact = true;        // the result equals the all-reduce average
  int64_t exact_until = 0;  // PowerSGD: exact for the steps before this one
};

Hook make_hook(const std::string& name, ddp_group* local) {
  Hook h;
  if (name == "allreduce") WOK(ddp_comm_hook_allreduce(&h.hook));
  else if (name == "fp16") WOK(ddp_comm_hook_fp16_compress(&h.hook));  // the test's values are exact in fp16
  else if (name == "bf16") WOK(ddp_comm_hook_bf16_compress(&h.hook));
  else if (name == "custom") WOK(ddp_comm_hook_custom(&h.hook, averaging_c_hook, nullptr));
  else if (name == "wrap_fp16_custom") {
    ddp_comm_hook* inner = nullptr;
    WOK(ddp_comm_hook_custom(&inner, averaging_c_hook, nullptr));
    WOK(ddp_comm_hook_wrap_fp16(&h.hook, inner));
    ddp_comm_hook_free(inner);
  } else if (name == "post_localsgd") {
    // One node: the local subgroup is every rank, so the average is global.
    WOK(ddp_comm_hook_post_localsgd(&h.hook, local, 20, 1));
  } else if (name == "powersgd" || name == "batched_powersgd") {
    ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
    o.start_powersgd_iter = 10;
    o.min_compression_rate = 0.5;
    o.batched = name == "batched_powersgd";
    WOK(ddp_comm_hook_powersgd(&h.hook, &o));
    h.exact = false;
    h.exact_until = 10;
  } else {
    WCHECK(false, "unknown SOAK_HOOK %s", name.c_str());
  }
  return h;
}

void scenario_soak_reducer() {
  ddp_group* g = join(120000);
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const int steps = env_int("SOAK_STEPS", 1000);
  const char* hook_env = std::getenv("SOAK_HOOK");
  const std::string hook_name = hook_env ? hook_env : "allreduce";
  ddp_group* local = nullptr;
  WOK(ddp_group_new_subgroups(g, 0, &local));
  // Shapes PowerSGD can compress (2-D views of 64x48 and 40x40) and ones it cannot.
  const std::vector<size_t> sizes = {3072, 5, 700, 1600, 1, 100, 5000, 17};
  const size_t n = sizes.size();
  FloatArrays grads(sizes, 0.0f);
  std::vector<std::vector<float>> sum_mine(n);  // this rank's accumulation since the last sync
  std::mt19937 shared(20261126);                // the same choices on every rank
  std::mt19937 local_rng(77 + rank);            // a different ready order on every rank
  ddp_reducer* red = nullptr;
  Hook hook;
  int64_t hook_steps = 0;  // synchronised steps the current hook has seen
  Usage at100{};
  int window_left = 0, checked = 0, recreated = 0;
  std::vector<int> window_steps;
  for (int step = 0; step < steps; ++step) {
    if (step % 50 == 0) {
      // A new reducer with random bucket caps (all ranks draw the same).
      if (red) ddp_reducer_free(red);
      if (hook.hook) ddp_comm_hook_free(hook.hook);
      static const double caps[] = {0.001, 0.004, 0.02, 0.1, 25.0};
      ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
      o.broadcast_parameters = 0;
      o.bucket_cap_mb = caps[shared() % 5];
      o.first_bucket_mb = caps[shared() % 5];
      o.find_unused_parameters = 1;
      WOK(ddp_reducer_new(&red, g, nullptr, grads.tensors(), n, &o));
      hook = make_hook(hook_name, local);
      WOK(ddp_reducer_set_comm_hook(red, hook.hook));
      hook_steps = 0;
      window_left = 0;
      window_steps.clear();
      ++recreated;
    }
    if (step == 100) at100 = usage();
    // A no_sync window of 1-3 steps starts with probability 1/8.
    bool sync = true;
    if (window_left == 0 && shared() % 8 == 0) window_left = 1 + static_cast<int>(shared() % 3);
    if (window_left > 0) {
      --window_left;
      sync = false;
    }
    // On a synchronised step outside a window, odd ranks may leave one
    // parameter unused (its gradient then counts zero from them).
    int unused = -1;
    if (sync && window_steps.empty() && shared() % 4 == 0) unused = static_cast<int>(shared() % n);
    WOK(ddp_reducer_set_sync(red, sync ? 1 : 0));
    const bool accumulate = !window_steps.empty();
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k)
        grads[i][k] = (accumulate ? grads[i][k] : 0.0f) + grad_value(rank, i, k, step);
    window_steps.push_back(step);
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), local_rng);
    for (size_t i : order)
      if (!(rank % 2 == 1 && static_cast<int>(i) == unused)) WOK(ddp_reducer_mark_ready(red, i));
    ddp_status st = ddp_reducer_finish(red);
    WOK(st);
    if (st != DDP_OK) break;
    if (!sync) continue;
    const bool exact = hook.exact || hook_steps < hook.exact_until;
    ++hook_steps;
    if (exact) {
      int bad = 0;
      for (size_t i = 0; i < n && bad < 3; ++i)
        for (size_t k = 0; k < sizes[i] && bad < 3; ++k) {
          double sum = 0;
          for (int r = 0; r < world; ++r) {
            if (r % 2 == 1 && static_cast<int>(i) == unused) continue;
            for (int s : window_steps) sum += grad_value(r, i, k, s);
          }
          float want = static_cast<float>(sum / world);
          if (grads[i][k] != want) {
            ++bad;
            WCHECK(false, "%s step %d: grad %zu[%zu] = %g, want %g", hook_name.c_str(), step, i, k, grads[i][k],
                   want);
          }
        }
    } else {
      // Every rank must hold the same finite result: MIN and MAX of a
      // checksum agree.
      double h = 0;
      for (size_t i = 0; i < n; ++i)
        for (size_t k = 0; k < sizes[i]; ++k) {
          WCHECK(std::isfinite(grads[i][k]), "step %d: non-finite gradient", step);
          h += grads[i][k] * static_cast<double>(1 + (k % 7));
        }
      double lo = 0, hi = 0;
      WCHECK(ranks_agree(g, h, &lo, &hi), "%s step %d: the ranks' results differ (%g vs %g)", hook_name.c_str(), step,
             lo, hi);
    }
    ++checked;
    window_steps.clear();
  }
  ddp_reducer_free(red);
  ddp_comm_hook_free(hook.hook);
  Usage end = settled_usage(at100);
  if (steps > 100) {
    if (rank == 0)
      std::printf("soak %s: %d steps on %d ranks, %d checked, %d reducers; growth from step 100: fds %+ld, "
                  "threads %+ld, RSS %+ld KiB\n",
                  hook_name.c_str(), steps, world, checked, recreated, end.fds - at100.fds,
                  end.threads - at100.threads, end.rss_kib - at100.rss_kib);
    WCHECK(end.fds <= at100.fds, "fds grew from %ld to %ld", at100.fds, end.fds);
    WCHECK(end.threads <= at100.threads, "threads grew from %ld to %ld", at100.threads, end.threads);
#ifndef __SANITIZE_ADDRESS__
    // Under ASan freed memory sits in its quarantine (256 MiB) instead of
    // being reused, so RSS says nothing there; LSan checks leaks at exit.
    WCHECK(end.rss_kib - at100.rss_kib <= 32 * 1024, "RSS grew by %ld KiB", end.rss_kib - at100.rss_kib);
#endif
  }
  ddp_group_free(local);
  ddp_group_free(g);
}

// SOAK_CYCLES (default 100) cycles of a whole strategy in one process:
// new, setup_environment (a new group on the same port), a model of one
// weight vector set up for DDP, 5 SGD steps on an MSE loss, teardown, free.
// After each cycle the ranks hold the same weights; from cycle 10 to the end
// fds and threads may not grow, RSS by at most 64 MiB.
void scenario_strategy_lifecycles() {
  const int cycles = env_int("SOAK_CYCLES", 100);
  const int64_t n = 256;
  Usage at10{};
  int rank = -1, world = 0;
  for (int cycle = 0; cycle < cycles; ++cycle) {
    if (cycle == 10) at10 = usage();
    ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
    so.timeout_ms = 60000;
    so.devices = env_int("WORLD_SIZE", 1);  // the launcher started them all (as torchrun would)
    ddp_strategy* s = nullptr;
    WOK(ddp_strategy_new(&s, &so));
    ddp_status st = ddp_strategy_setup_environment(s);
    WOK(st);
    if (st != DDP_OK) {
      ddp_strategy_free(s);
      break;
    }
    rank = ddp_strategy_global_rank(s);
    world = ddp_strategy_world_size(s);
    std::vector<float> w0(n), x(n), y(n);
    for (int64_t k = 0; k < n; ++k) {
      w0[k] = static_cast<float>(rank + 1) * 0.01f * static_cast<float>(k % 5);  // differs: setup broadcasts rank 0's
      x[k] = static_cast<float>((k % 7) - 3) * (rank + 1);                          // each rank its own batch
      y[k] = 0.5f * x[k] + 0.1f * cycle;
    }
    int64_t shape[1] = {n};
    ddp_tensor *w = nullptr, *tx = nullptr, *ty = nullptr;
    WOK(ddp_tensor_from_blob(&w, w0.data(), DDP_FLOAT32, shape, 1));
    WOK(ddp_tensor_set_requires_grad(w, 1));
    WOK(ddp_tensor_from_blob(&tx, x.data(), DDP_FLOAT32, shape, 1));
    WOK(ddp_tensor_from_blob(&ty, y.data(), DDP_FLOAT32, shape, 1));
    const char* names[] = {"weight"};
    ddp_module* m = nullptr;
    WOK(ddp_module_from_tensors(&m, names, &w, nullptr, 1));
    WOK(ddp_strategy_setup_module(s, m));
    ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
    sgd.lr = 0.01;
    ddp_optimizer* opt = nullptr;
    WOK(ddp_optimizer_new_sgd(&opt, m, &sgd));
    for (int step = 0; step < 5; ++step) {
      ddp_tensor *pred = nullptr, *loss = nullptr;
      WOK(ddp_tensor_binary(DDP_OP_MUL, w, tx, &pred));
      WOK(ddp_loss_mse(pred, ty, &loss));
      WOK(ddp_optimizer_zero_grad(opt));
      WOK(ddp_strategy_backward(s, loss));
      WOK(ddp_strategy_optimizer_step(s, opt));
      ddp_tensor_free(pred);
      ddp_tensor_free(loss);
    }
    // The same weights everywhere: MIN and MAX of a checksum agree.
    ddp_tensor* now = nullptr;
    WOK(ddp_module_get(m, "weight", &now));
    std::vector<float> got(n);
    WOK(ddp_tensor_copy_to(now, got.data(), got.size() * sizeof(float)));
    double h = 0;
    for (int64_t k = 0; k < n; ++k) h += got[k] * static_cast<double>(k + 1);
    double lo = 0, hi = 0;
    WCHECK(ranks_agree(ddp_strategy_group(s), h, &lo, &hi), "cycle %d: the ranks' weights differ (%g vs %g)", cycle,
           lo, hi);
    ddp_tensor* all[] = {now, w, tx, ty};
    for (auto* t : all) ddp_tensor_free(t);
    ddp_optimizer_free(opt);
    WOK(ddp_strategy_teardown(s));
    ddp_module_free(m);
    ddp_strategy_free(s);
  }
  Usage end = settled_usage(at10);
  if (cycles > 10) {
    if (rank == 0)
      std::printf("lifecycles: %d cycles of new/setup/fit/teardown on %d ranks; growth from cycle 10: fds %+ld, "
                  "threads %+ld, RSS %+ld KiB\n",
                  cycles, world, end.fds - at10.fds, end.threads - at10.threads, end.rss_kib - at10.rss_kib);
    WCHECK(end.fds <= at10.fds, "fds grew from %ld to %ld", at10.fds, end.fds);
    WCHECK(end.threads <= at10.threads, "threads grew from %ld to %ld", at10.threads, end.threads);
#ifndef __SANITIZE_ADDRESS__
    WCHECK(end.rss_kib - at10.rss_kib <= 64 * 1024, "RSS grew by %ld KiB", end.rss_kib - at10.rss_kib);
#endif
  }
}

}  // namespace

WORKER_SCENARIO("soak_reducer", scenario_soak_reducer);
WORKER_SCENARIO("strategy_lifecycles", scenario_strategy_lifecycles);
