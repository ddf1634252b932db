// mp_worker scenarios: The DDP engine on real ranks: buckets, averaging, no_sync, unused parameters, uneven inputs (join).
#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include "worker_util.h"
#include "worker_scenarios.h"

using namespace worker;

namespace {

// The caller-owned reducer on plain float arrays: random ready orders,
// several buckets, no_sync accumulation, unused parameters, buckets as views.
void scenario_reducer() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const std::vector<size_t> sizes = {300000, 5, 70000, 262144, 1, 1000, 500000, 17};
  const size_t n = sizes.size();
  FloatArrays params(sizes, 0.0f), grads(sizes, 0.0f);
  for (size_t i = 0; i < n; ++i)
    std::fill(params[i].begin(), params[i].end(), static_cast<float>(rank * 100 + i));  // differs per rank
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.first_bucket_mb = 0.25;
  o.bucket_cap_mb = 1.0;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, params.tensors(), grads.tensors(), n, &o));
  // broadcast_parameters: everyone now holds rank 0's parameters.
  for (size_t i = 0; i < n; ++i) WCHECK(params[i][0] == static_cast<float>(i), "param %zu not broadcast", i);
  size_t nb = ddp_reducer_bucket_count(red);
  WCHECK(nb >= 3, "expected several buckets, got %zu", nb);
  size_t seen = 0;
  for (size_t b = 0; b < nb; ++b) {
    size_t cnt = 0;
    WOK(ddp_reducer_bucket_indices(red, b, nullptr, 0, &cnt));
    seen += cnt;
  }
  WCHECK(seen == n, "buckets hold %zu of %zu parameters", seen, n);

  auto fill = [&](int step, bool accumulate) {
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k)
        grads[i][k] = (accumulate ? grads[i][k] : 0.0f) + grad_value(rank, i, k, step);
  };
  auto expect_avg = [&](std::vector<int> steps, const char* what, std::vector<size_t> zero_on_odd = {}) {
    int bad = 0;
    for (size_t i = 0; i < n && bad < 3; ++i)
      for (size_t k = 0; k < sizes[i] && bad < 3; ++k) {
        double sum = 0;
        for (int r = 0; r < world; ++r) {
          bool unused = r % 2 == 1 && std::find(zero_on_odd.begin(), zero_on_odd.end(), i) != zero_on_odd.end();
          if (unused) continue;
          for (int st : steps) sum += grad_value(r, i, k, st);
        }
        float want = static_cast<float>(sum / world);
        if (grads[i][k] != want) {
          ++bad;
          WCHECK(false, "%s: grad %zu[%zu] = %g, want %g", what, i, k, grads[i][k], want);
        }
      }
  };
  std::srand(1234 + rank * 77);  // a different ready order on every rank
  for (int step = 0; step < 3; ++step) {
    fill(step, false);
    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = i;
    for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[static_cast<size_t>(std::rand()) % (i + 1)]);
    for (size_t i : order) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    expect_avg({step}, "random order");
  }
  // Marking twice is an error; an unready gradient fails finish by name, and the step stays open.
  fill(7, false);
  WOK(ddp_reducer_mark_ready(red, 0));
  WCHECK(ddp_reducer_mark_ready(red, 0) == DDP_E_STATE, "twice");
  for (size_t i = 1; i < n; ++i)
    if (i != 5) WOK(ddp_reducer_mark_ready(red, i));
  WCHECK(ddp_reducer_finish(red) == DDP_E_STATE, "unready gradient");
  WCHECK(std::strstr(ddp_last_error_message(), "gradients 5 were not marked ready") != nullptr, "message: %s",
         ddp_last_error_message());
  WOK(ddp_reducer_mark_ready(red, 5));
  WOK(ddp_reducer_finish(red));
  expect_avg({7}, "after the unready error");
  // no_sync: two local steps accumulate, the synchronised third reduces the sum.
  WOK(ddp_reducer_set_sync(red, 0));
  fill(10, false);
  for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_mark_ready(red, i));
  WOK(ddp_reducer_finish(red));
  fill(11, true);
  WOK(ddp_reducer_finish(red));
  WOK(ddp_reducer_set_sync(red, 1));
  fill(12, true);
  for (size_t i = n; i-- > 0;) WOK(ddp_reducer_mark_ready(red, i));
  WOK(ddp_reducer_finish(red));
  expect_avg({10, 11, 12}, "no_sync accumulation");
  ddp_reducer_free(red);

  // find_unused_parameters: odd ranks never mark gradients 2 and 5.
  o.find_unused_parameters = 1;
  o.broadcast_parameters = 0;
  WOK(ddp_reducer_new(&red, g, nullptr, grads.tensors(), n, &o));
  fill(20, false);
  for (size_t i = 0; i < n; ++i)
    if (rank % 2 == 0 || (i != 2 && i != 5)) WOK(ddp_reducer_mark_ready(red, i));
  WOK(ddp_reducer_finish(red));
  expect_avg({20}, "unused parameters", {2, 5});
  ddp_reducer_free(red);

  // gradient_as_bucket_view: write gradients straight into the buckets.
  o.find_unused_parameters = 0;
  o.gradient_as_bucket_view = 1;
  WOK(ddp_reducer_new(&red, g, params.tensors(), nullptr, n, &o));
  std::vector<ddp_tensor*> views(n);
  for (size_t i = 0; i < n; ++i) {
    WOK(ddp_reducer_gradient(red, i, &views[i]));
    WCHECK(ddp_tensor_numel(views[i]) == static_cast<int64_t>(sizes[i]), "view size");
    float* v = static_cast<float*>(ddp_tensor_data(views[i]));
    for (size_t k = 0; k < sizes[i]; ++k) v[k] = grad_value(rank, i, k, 30);
  }
  for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_mark_ready(red, i));
  WOK(ddp_reducer_finish(red));
  for (size_t i = 0; i < n; ++i) {
    WOK(ddp_tensor_copy_to(views[i], grads[i].data(), sizes[i] * sizeof(float)));
    ddp_tensor_free(views[i]);
  }
  expect_avg({30}, "gradient_as_bucket_view");
  ddp_reducer_free(red);

  // The same views, looked up once and written every step, with static_graph
  // (whose buckets PyTorch rebuilds after the second step) and a ready order
  // that is not the buckets' own: a rebuild that moved the gradients left
  // these views on the old storage, and steps 3 and 4 averaged stale values.
  o.static_graph = 1;
  WOK(ddp_reducer_new(&red, g, params.tensors(), nullptr, n, &o));
  for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_gradient(red, i, &views[i]));
  for (int step = 40; step < 44; ++step) {
    for (size_t i = 0; i < n; ++i) {
      float* v = static_cast<float*>(ddp_tensor_data(views[i]));
      for (size_t k = 0; k < sizes[i]; ++k) v[k] = grad_value(rank, i, k, step);
    }
    for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    for (size_t i = 0; i < n; ++i) WOK(ddp_tensor_copy_to(views[i], grads[i].data(), sizes[i] * sizeof(float)));
    expect_avg({step}, "static_graph with views looked up once");
  }
  for (size_t i = 0; i < n; ++i) ddp_tensor_free(views[i]);
  ddp_reducer_free(red);

  // With autograd_hooks the rebuild after the second step does move the
  // gradients, as PyTorch's does: each parameter's .grad follows its new
  // view, so every step still averages. Rank r's loss is sum(p_i) * w with
  // w = (r + 1) * (step + 1), so every .grad is the mean of the ranks' w.
  o.autograd_hooks = 1;
  o.broadcast_parameters = 0;
  std::vector<ddp_tensor*> leaves(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t shape[1] = {static_cast<int64_t>(sizes[i])};
    WOK(ddp_tensor_from_blob(&leaves[i], params[i].data(), DDP_FLOAT32, shape, 1));
    WOK(ddp_tensor_set_requires_grad(leaves[i], 1));
  }
  WOK(ddp_reducer_new(&red, g, leaves.data(), nullptr, n, &o));
  const void* first_grad = nullptr;
  for (int step = 0; step < 4; ++step) {
    ddp_tensor* loss = nullptr;
    for (size_t i = 0; i < n; ++i) {
      ddp_tensor *s = nullptr, *total = nullptr;
      WOK(ddp_tensor_sum(leaves[i], nullptr, 0, 0, &s));
      if (loss) WOK(ddp_tensor_binary(DDP_OP_ADD, loss, s, &total));
      ddp_tensor_free(loss);
      loss = total ? total : s;
      if (total) ddp_tensor_free(s);
    }
    ddp_tensor* scaled = nullptr;
    WOK(ddp_tensor_binary_scalar(DDP_OP_MUL, loss, (rank + 1.0) * (step + 1.0), &scaled));
    WOK(ddp_tensor_backward(scaled));
    ddp_tensor_free(scaled);
    ddp_tensor_free(loss);
    const float want = static_cast<float>((world + 1) / 2.0 * (step + 1));
    for (size_t i = 0; i < n; ++i) {
      ddp_tensor* gr = nullptr;
      WOK(ddp_tensor_grad(leaves[i], &gr));
      WCHECK(gr != nullptr, "autograd static_graph step %d: parameter %zu has no .grad", step, i);
      if (!gr) continue;
      if (i == 0 && step == 0) first_grad = ddp_tensor_data(gr);
      if (i == 0 && step == 3)
        WCHECK(ddp_tensor_data(gr) != first_grad, "autograd static_graph: .grad did not move with the rebuild");
      WOK(ddp_tensor_copy_to(gr, grads[i].data(), sizes[i] * sizeof(float)));
      WCHECK(grads[i].front() == want && grads[i].back() == want, "autograd static_graph step %d: .grad %zu = %g, want %g",
             step, i, grads[i].front(), want);
      // zero_grad (set_to_none = False): the next step accumulates from zero.
      std::memset(ddp_tensor_data(gr), 0, sizes[i] * sizeof(float));
      ddp_tensor_free(gr);
    }
  }
  ddp_reducer_free(red);
  for (auto* l : leaves) ddp_tensor_free(l);
  o.static_graph = 0;
  o.autograd_hooks = 0;
  ddp_group_free(g);
}

// Uneven inputs: rank r has {3, 5, 8}[r % 3] batches, joins when out of
// data; every step's average is over the ranks still training, and the
// final parameters equal a reference computed from the same batches.
void scenario_join() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const int kBatches[3] = {3, 5, 8};
  auto batches_of = [&](int r) { return kBatches[r % 3]; };
  const std::vector<size_t> sizes = {4000, 3, 70000, 129};
  const size_t n = sizes.size();
  FloatArrays params(sizes, 1.0f), grads(sizes, 0.0f);
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.join_enabled = 1;
  o.first_bucket_mb = 0.01;
  o.bucket_cap_mb = 0.1;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, params.tensors(), grads.tensors(), n, &o));
  const float lr = 0.125f;
  for (int step = 0; step < batches_of(rank); ++step) {
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k) grads[i][k] = grad_value(rank, i, k, step);
    for (size_t i = n; i-- > 0;) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k) params[i][k] -= lr * grads[i][k];
  }
  auto t0 = std::chrono::steady_clock::now();
  WOK(ddp_reducer_join(red));
  WCHECK(seconds_since(t0) < 30, "join took %.1f s", seconds_since(t0));
  int max_steps = 0;
  for (int r = 0; r < world; ++r) max_steps = std::max(max_steps, batches_of(r));
  int bad = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t k = 0; k < sizes[i] && bad < 3; ++k) {
      double p = 1.0;
      for (int step = 0; step < max_steps; ++step) {
        double sum = 0;
        int active = 0;
        for (int r = 0; r < world; ++r)
          if (step < batches_of(r)) sum += grad_value(r, i, k, step), ++active;
        // a rank's own parameters move only while it trains
        if (step < batches_of(rank)) p -= lr * (sum / active);
      }
      if (std::fabs(params[i][k] - p) > 1e-4 * std::max(1.0, std::fabs(p))) {
        ++bad;
        WCHECK(false, "param %zu[%zu] = %.7g, reference %.7g", i, k, params[i][k], p);
      }
    }
  ddp_reducer_free(red);
  ddp_group_free(g);
}

// Whether p lies in a mapping of the shm backend's memfds (/proc/self/maps).
bool in_shm_memfd(const void* p) {
  std::ifstream maps("/proc/self/maps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  for (std::string line; std::getline(maps, line);) {
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) != 2) continue;
    if (at >= begin && at < end) return line.find("memfd:ddp-shm") != std::string::npos;
  }
  return false;
}

// On shm the reducer averages the gradients where they lie (one all-reduce
// over a bucket's gradients, no copies into the bucket or back); on Gloo it
// goes through its buckets. Both must give the bucket's bits, PyTorch's: the
// same floats at every world size, with values whose scaling by 1/world
// rounds, buckets under 32 KiB (shm combines those whole) and over it,
// float and double buckets, and unused gradients (through their slots).
// DDP_TEST_BUCKET_VIEW=1: with gradient_as_bucket_view, where shm keeps the
// buckets in memory every rank maps and reduces them there (scaling each
// rank's values as it reads them where the world is a power of two).
// DDP_TEST_STATIC_GRAPH=1: with static_graph, every gradient marked in every
// step (its first step only counts, and reduces everything in finish). The
// caller's views keep their buckets: no rebuild moves them (reducer.h).
// The gradients of reducer_steps(): their sizes; the last two are float64.
const std::vector<size_t> kStepSizes = {300000, 5, 70000, 262144, 1, 1000, 500000, 17, 3000};

// The gradients of a few reducer steps on `backend` (the caller's buffers,
// or with DDP_TEST_BUCKET_VIEW=1 their bucket views), step after step.
std::vector<std::vector<uint8_t>> reducer_steps(const char* backend, const std::string& setting) {
  const bool bucket_view = env_int("DDP_TEST_BUCKET_VIEW", 0) == 1;
  const bool static_graph = env_int("DDP_TEST_STATIC_GRAPH", 0) == 1;
  const bool on_shm = std::string(backend) == "shm";
  // DDP_SHM_SHARED_BUCKETS=0 (the switch for measuring) keeps them private.
  const bool shared_expected = on_shm && bucket_view && env_int("DDP_SHM_SHARED_BUCKETS", 1) == 1;
  const std::vector<size_t>& sizes = kStepSizes;
  const size_t n = sizes.size(), n_double = 2;
  std::vector<std::vector<uint8_t>> out;
  ddp_group* g = join(60000, backend);
  const int rank = ddp_group_rank(g);
  WCHECK(std::string(ddp_group_backend(g)) == backend, "[%s] asked for %s, got %s", setting.c_str(), backend,
         ddp_group_backend(g));
  std::vector<std::vector<uint8_t>> bufs(n);
  std::vector<ddp_tensor*> grads(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const bool dbl = i >= n - n_double;
    bufs[i].assign(sizes[i] * (dbl ? 8 : 4), 0);
    int64_t shape[1] = {static_cast<int64_t>(sizes[i])};
    WOK(ddp_tensor_from_blob(&grads[i], bufs[i].data(), dbl ? DDP_FLOAT64 : DDP_FLOAT32, shape, 1));
  }
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.first_bucket_mb = 0.01;
  o.bucket_cap_mb = 1.0;
  o.find_unused_parameters = !static_graph;
  o.static_graph = static_graph;
  o.broadcast_parameters = 0;
  o.gradient_as_bucket_view = bucket_view;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, nullptr, grads.data(), n, &o));
  // Where each gradient lives: the caller's buffer, or its bucket view.
  std::vector<ddp_tensor*> views(n, nullptr);
  std::vector<uint8_t*> data(n);
  for (int step = 0; step < (static_graph ? 4 : 3); ++step) {
    for (size_t i = 0; i < n; ++i) {
      data[i] = bufs[i].data();
      if (!bucket_view) continue;
      ddp_tensor_free(views[i]);
      WOK(ddp_reducer_gradient(red, i, &views[i]));
      data[i] = static_cast<uint8_t*>(ddp_tensor_data(views[i]));
      WCHECK(in_shm_memfd(data[i]) == shared_expected, "[%s] on %s, step %d: gradient %zu's bucket is %sin shared memory",
             setting.c_str(), backend, step, i, shared_expected ? "not " : "");
    }
    std::mt19937 gen(static_cast<uint32_t>(1000 * step + 7 * rank + 1));
    std::uniform_real_distribution<double> value(-3.0, 3.0);
    for (size_t i = 0; i < n; ++i) {
      const bool dbl = i >= n - n_double;
      for (size_t e = 0; e < sizes[i]; ++e) {
        if (dbl) reinterpret_cast<double*>(data[i])[e] = value(gen);
        else reinterpret_cast<float*>(data[i])[e] = static_cast<float>(value(gen));
      }
    }
    for (size_t i = n; i-- > 0;)
      if (static_graph || step != 1 || rank % 2 == 0 || (i != 2 && i != 5)) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    for (size_t i = 0; i < n; ++i) out.emplace_back(data[i], data[i] + bufs[i].size());
  }
  for (auto* v : views) ddp_tensor_free(v);
  ddp_reducer_free(red);
  for (auto* t : grads) ddp_tensor_free(t);
  ddp_group_free(g);
  return out;
}

// The reducer's steps once on Gloo, then on shm under each of
// shm_settings() (each a fresh group on the same port): the same bits.
void scenario_reducer_shm_matches_gloo() {
  const auto on_gloo = reducer_steps("gloo", "gloo");
  const size_t n = kStepSizes.size();  // gradients per step
  for (const std::string& setting : shm_settings()) {
    if (g_rank != 0) usleep(500 * 1000);  // rank 0's last store is surely gone
    ScopedSetting in_env(setting);
    const auto shm = reducer_steps("shm", setting);
    WCHECK(shm.size() == on_gloo.size(), "[%s] %zu results on shm, %zu on gloo", setting.c_str(), shm.size(),
           on_gloo.size());
    int reported = 0;
    for (size_t c = 0; c < std::min(shm.size(), on_gloo.size()) && reported < 5; ++c) {
      if (shm[c] == on_gloo[c]) continue;
      size_t at = 0;
      while (at < shm[c].size() && shm[c][at] == on_gloo[c][at]) ++at;
      ++reported;
      WCHECK(false, "[%s] step %zu, gradient %zu: shm and gloo differ from byte %zu of %zu", setting.c_str(), c / n,
             c % n, at, shm[c].size());
    }
  }
}

}  // namespace

WORKER_SCENARIO("reducer", scenario_reducer);
WORKER_SCENARIO("reducer_shm_matches_gloo", scenario_reducer_shm_matches_gloo);
WORKER_SCENARIO("join", scenario_join);
