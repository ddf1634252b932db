// mp_worker scenarios: the shared-memory backend against Gloo. Every rank
// runs the same collectives twice, over "shm" and then over "gloo" (a fresh
// group on the same port), and compares what it got. Everything is bitwise
// equal (shm adds in the order of Gloo's ring), except float reduce (Gloo's
// reduce has an order of its own) and float all_reduce across nodes (shm
// inside each node first): those agree within a few units in the last place.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "worker_scenarios.h"
#include "worker_util.h"

using namespace worker;

namespace {

using Bytes = std::vector<char>;

uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  return x ^ (x >> 16);
}

// Element i of rank r for `op`: fractions for floats (so the order of a
// sum shows in the last bits), small integers otherwise, values near 1 for
// products (so they neither overflow nor vanish).
double value(ddp_dtype d, ddp_reduce_op op, int r, size_t i) {
  uint32_t h = mix(static_cast<uint32_t>(r) * 0x9e3779b9U + static_cast<uint32_t>(i));
  if (d == DDP_BOOL) return h & 1;
  if (is_float(d)) return op == DDP_PRODUCT ? 0.9 + (h % 200) / 1000.0 : ((h % 2001) - 1000.0) / 256.0;
  if (d == DDP_UINT8) return h % 7;
  return static_cast<double>(h % 7) - 3;
}

Bytes input(ddp_dtype d, ddp_reduce_op op, int r, size_t n) {
  Bytes b(n * ddp_dtype_size(d) + 1);
  for (size_t i = 0; i < n; ++i) store(d, b.data(), i, value(d, op, r, i));
  return b;
}

Bytes contents(ddp_tensor* t) {
  Bytes b(ddp_tensor_nbytes(t) + 1);
  WOK(ddp_tensor_copy_to(t, b.data(), ddp_tensor_nbytes(t)));
  return b;
}

struct Result {
  std::string what;
  ddp_dtype dtype;
  Bytes bytes;
};

// One pass of every collective, in an order that every rank shares.
std::vector<Result> run_all(ddp_group* g) {
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  std::vector<Result> out;
  // 37: the one-barrier path; 1000: a broadcast its root posts, streamed
  // where it has more than 2 KiB (float32); 9000: each rank reduces its
  // share, and a broadcast's ranks copy between their tensors; 300000
  // float32 and int64: such a broadcast of more than a slot; 1.1M:
  // several pieces through the slots.
  for (ddp_dtype d : kAllDtypes)
    for (size_t n : {size_t{1}, size_t{37}, size_t{1000}, size_t{9000}, size_t{300000}, size_t{1100000}}) {
      if (n > 9000 && d != DDP_FLOAT32 && d != DDP_INT64) continue;
      int64_t shape[1] = {static_cast<int64_t>(n)};
      std::string tag = std::string(ddp_dtype_name(d)) + "[" + std::to_string(n) + "] ";
      for (ddp_reduce_op op : {DDP_SUM, DDP_MEAN, DDP_MIN, DDP_MAX, DDP_PRODUCT}) {
        Bytes b = input(d, op, rank, n);
        ddp_tensor* t = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, shape, 1));
        WOK(ddp_all_reduce(g, t, op));
        out.push_back({tag + "all_reduce op " + std::to_string(op), d, b});
        ddp_tensor_free(t);
      }
      {
        Bytes b = input(d, DDP_SUM, rank, n);
        ddp_tensor* t = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, shape, 1));
        WOK(ddp_reduce(g, t, world - 1, DDP_SUM));
        if (rank == world - 1) out.push_back({tag + "reduce", d, b});
        ddp_tensor_free(t);
      }
      {
        Bytes b = input(d, DDP_SUM, rank, n);
        ddp_tensor* t = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, shape, 1));
        WOK(ddp_broadcast(g, t, world - 1));
        out.push_back({tag + "broadcast", d, b});
        ddp_tensor_free(t);
      }
      {
        Bytes b = input(d, DDP_SUM, rank, n);
        ddp_tensor *t = nullptr, *all = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, shape, 1));
        WOK(ddp_all_gather(g, t, &all));
        if (all) out.push_back({tag + "all_gather", d, contents(all)});
        ddp_tensor_free(all);
        ddp_tensor_free(t);
      }
      {
        // Into the caller's tensor (world x n), then in place: this rank's
        // input is its own row of the output, filled beforehand.
        const size_t esz = ddp_dtype_size(d);
        Bytes b = input(d, DDP_SUM, rank, n), into(world * n * esz + 1, 0);
        int64_t rows[2] = {world, static_cast<int64_t>(n)};
        ddp_tensor *t = nullptr, *o = nullptr, *own = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, shape, 1));
        WOK(ddp_tensor_from_blob(&o, into.data(), d, rows, 2));
        WOK(ddp_all_gather_into_tensor(g, t, o));
        out.push_back({tag + "all_gather_into_tensor", d, into});
        std::fill(into.begin(), into.end(), 0);
        std::copy(b.begin(), b.end() - 1, into.begin() + static_cast<ptrdiff_t>(rank * n * esz));
        WOK(ddp_tensor_from_blob(&own, into.data() + rank * n * esz, d, shape, 1));
        WOK(ddp_all_gather_into_tensor(g, own, o));
        out.push_back({tag + "all_gather_into_tensor in place", d, into});
        for (ddp_tensor* x : {t, o, own}) ddp_tensor_free(x);
      }
      {
        // The async forms on caller memory, waited in call order: shm
        // performs those it would run on this thread anyway before the call
        // returns (no copy of the caller's memory), Gloo works on copies.
        const size_t esz = ddp_dtype_size(d);
        Bytes sum = input(d, DDP_SUM, rank, n), mean = input(d, DDP_MEAN, rank, n),
              bcast = input(d, DDP_SUM, rank + 1, n), gin = input(d, DDP_MAX, rank, n),
              into(world * n * esz + 1, 0);
        int64_t rows[2] = {world, static_cast<int64_t>(n)};
        ddp_tensor *ts = nullptr, *tm = nullptr, *tb = nullptr, *tg = nullptr, *to = nullptr, *all = nullptr;
        WOK(ddp_tensor_from_blob(&ts, sum.data(), d, shape, 1));
        WOK(ddp_tensor_from_blob(&tm, mean.data(), d, shape, 1));
        WOK(ddp_tensor_from_blob(&tb, bcast.data(), d, shape, 1));
        WOK(ddp_tensor_from_blob(&tg, gin.data(), d, shape, 1));
        WOK(ddp_tensor_from_blob(&to, into.data(), d, rows, 2));
        ddp_work* w[5] = {};
        WOK(ddp_all_reduce_async(g, ts, DDP_SUM, &w[0]));
        WOK(ddp_all_reduce_async(g, tm, DDP_MEAN, &w[1]));
        WOK(ddp_broadcast_async(g, tb, 0, &w[2]));
        WOK(ddp_all_gather_async(g, tg, &w[3]));
        WOK(ddp_all_gather_into_tensor_async(g, tg, to, &w[4]));
        for (ddp_work* x : w) WOK(ddp_work_wait(x, -1));
        WOK(ddp_work_result_tensor(w[3], 0, &all));
        out.push_back({tag + "async all_reduce sum", d, sum});
        out.push_back({tag + "async all_reduce mean", d, mean});
        out.push_back({tag + "async broadcast", d, bcast});
        if (all) out.push_back({tag + "async all_gather", d, contents(all)});
        out.push_back({tag + "async all_gather_into_tensor", d, into});
        for (ddp_work* x : w) ddp_work_free(x);
        for (ddp_tensor* x : {ts, tm, tb, tg, to, all}) ddp_tensor_free(x);
      }
      if (n <= 9000) {
        // Rank r contributes n + r elements.
        int64_t mine[1] = {static_cast<int64_t>(n) + rank};
        Bytes b = input(d, DDP_SUM, rank, n + rank);
        ddp_tensor* t = nullptr;
        WOK(ddp_tensor_from_blob(&t, b.data(), d, mine, 1));
        std::vector<ddp_tensor*> parts(world, nullptr);
        WOK(ddp_all_gather_uneven(g, t, parts.data()));
        for (int r = 0; r < world; ++r)
          if (parts[r]) {
            out.push_back({tag + "all_gather_uneven from " + std::to_string(r), d, contents(parts[r])});
            ddp_tensor_free(parts[r]);
          }
        ddp_tensor_free(t);
      }
    }
  {
    // Blocking calls made while an async one (over 4 MiB: on shm's worker
    // thread, under DDP_SHM_INLINE=0 or on a host with cores to spare) is
    // still running wait their turn behind it, though they could run on the
    // caller's thread (shm's direct path).
    const size_t big_n = 1100000, small_n = 37;
    int64_t big_shape[1] = {static_cast<int64_t>(big_n)}, small_shape[1] = {static_cast<int64_t>(small_n)};
    Bytes big = input(DDP_FLOAT32, DDP_SUM, rank, big_n), small = input(DDP_FLOAT32, DDP_MAX, rank, small_n),
          cast = input(DDP_FLOAT32, DDP_SUM, rank + 1, small_n);
    ddp_tensor *tb = nullptr, *ts = nullptr, *tc = nullptr;
    ddp_work* w = nullptr;
    WOK(ddp_tensor_from_blob(&tb, big.data(), DDP_FLOAT32, big_shape, 1));
    WOK(ddp_tensor_from_blob(&ts, small.data(), DDP_FLOAT32, small_shape, 1));
    WOK(ddp_tensor_from_blob(&tc, cast.data(), DDP_FLOAT32, small_shape, 1));
    Bytes gathered(world * small_n * 4 + 1, 0);
    int64_t gathered_shape[1] = {static_cast<int64_t>(world * small_n)};
    ddp_tensor* tg = nullptr;
    WOK(ddp_tensor_from_blob(&tg, gathered.data(), DDP_FLOAT32, gathered_shape, 1));
    ddp_work* wg = nullptr;
    WOK(ddp_all_reduce_async(g, tb, DDP_SUM, &w));
    WOK(ddp_all_reduce(g, ts, DDP_MAX));
    WOK(ddp_broadcast(g, tc, 0));
    WOK(ddp_all_gather_into_tensor(g, tc, tg));
    WOK(ddp_all_gather_into_tensor_async(g, ts, tg, &wg));
    WOK(ddp_barrier(g));
    WOK(ddp_work_wait(w, -1));
    WOK(ddp_work_wait(wg, -1));
    WCHECK(ddp_work_result_count(wg) == 1, "all_gather_into_tensor's work has %zu results", ddp_work_result_count(wg));
    ddp_work_free(w);
    ddp_work_free(wg);
    out.push_back({"async all_reduce before blocking calls", DDP_FLOAT32, big});
    out.push_back({"blocking all_reduce behind an async one", DDP_FLOAT32, small});
    out.push_back({"blocking broadcast behind an async one", DDP_FLOAT32, cast});
    out.push_back({"blocking all_gather_into_tensor, then async, behind an async one", DDP_FLOAT32, gathered});
    for (ddp_tensor* t : {tb, ts, tc, tg}) ddp_tensor_free(t);
  }
  {
    // A gather whose element count overflows int64 (2^62 bytes from each of
    // at least 2 ranks): refused by name on every rank, nothing sent.
    char byte = 0;
    int64_t huge[1] = {int64_t{1} << 62}, one[1] = {1};
    ddp_tensor *h = nullptr, *o = nullptr;
    WOK(ddp_tensor_from_blob(&h, &byte, DDP_UINT8, huge, 1));
    WOK(ddp_tensor_from_blob(&o, &byte, DDP_UINT8, one, 1));
    ddp_status st = ddp_all_gather_into_tensor(g, h, o);
    WCHECK(st == DDP_E_INVALID_ARGUMENT && std::strstr(ddp_last_error_message(), "overflow"),
           "an overflowing gather gave %s: %s", ddp_status_string(st), ddp_last_error_message());
    ddp_tensor_free(h);
    ddp_tensor_free(o);
  }
  std::string text = "bytes from rank " + std::to_string(world - 1) + std::string(5000, 'x');
  ddp_buffer* buf = nullptr;
  WOK(ddp_broadcast_bytes(g, text.data(), text.size(), world - 1, &buf));
  if (buf) {
    auto* p = static_cast<const char*>(ddp_buffer_data(buf));
    out.push_back({"broadcast_bytes", DDP_UINT8, Bytes(p, p + ddp_buffer_size(buf))});
    ddp_buffer_free(buf);
  }
  int any = -1;
  WOK(ddp_reduce_boolean_decision(g, rank == 1, 0, &any));
  out.push_back({"reduce_boolean_decision", DDP_INT32, Bytes(reinterpret_cast<char*>(&any), reinterpret_cast<char*>(&any) + 4)});
  WOK(ddp_barrier(g));
  return out;
}

// Relative tolerance of a float sum or product in another order: a few
// rounding steps of the dtype.
double tolerance(ddp_dtype d) {
  switch (d) {
    case DDP_FLOAT64: return 1e-12;
    case DDP_FLOAT32: return 1e-5;
    case DDP_FLOAT16: return 1e-2;
    case DDP_BFLOAT16: return 5e-2;
    default: return 0;
  }
}

// DDP_TEST_ONE_CPU_RANK=r: rank r runs on one CPU only (as under taskset),
// so that it alone finds the host crowded, while this lives.
class OneCpuIfAsked {
 public:
  OneCpuIfAsked() {
    if (env_int("DDP_TEST_ONE_CPU_RANK", -1) != g_rank) return;
    WCHECK(sched_getaffinity(0, sizeof mine_, &mine_) == 0, "sched_getaffinity failed");
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mine_)) {
        CPU_SET(c, &one);
        break;
      }
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
    WCHECK(pinned_, "sched_setaffinity failed");
  }
  ~OneCpuIfAsked() {
    if (pinned_) WCHECK(sched_setaffinity(0, sizeof mine_, &mine_) == 0, "sched_setaffinity (back) failed");
  }

 private:
  cpu_set_t mine_{};
  bool pinned_ = false;
};

// Where shm's results under `setting` differ from Gloo's (at most 10 reported).
void compare_with_gloo(const std::string& setting, const std::vector<Result>& shm, const std::vector<Result>& gloo,
                       int world) {
  WCHECK(shm.size() == gloo.size(), "[%s] %zu results on shm, %zu on gloo", setting.c_str(), shm.size(), gloo.size());
  int reported = 0;
  for (size_t c = 0; c < std::min(shm.size(), gloo.size()) && reported < 10; ++c) {
    const Result &s = shm[c], &x = gloo[c];
    if (s.bytes == x.bytes) continue;
    const bool one_node = env_int("LOCAL_WORLD_SIZE", world) == world;
    const bool order_may_differ = s.what.find("] reduce") != std::string::npos || !one_node;
    bool close = s.bytes.size() == x.bytes.size() && is_float(s.dtype) && world > 2 && order_may_differ;
    size_t n = s.bytes.size() / ddp_dtype_size(s.dtype);
    for (size_t i = 0; close && i < n; ++i) {
      double a = load(s.dtype, s.bytes.data(), i), b = load(s.dtype, x.bytes.data(), i);
      close = std::fabs(a - b) <= tolerance(s.dtype) * std::max(1.0, std::fabs(b));
    }
    ++reported;
    WCHECK(close, "[%s] %s differs between shm and gloo", setting.c_str(), s.what.c_str());
  }
}

// Every collective once on Gloo, then on shm under each of shm_settings()
// (each a fresh group on the same port): the same results. Each setting's
// are compared and let go before the next (they take hundreds of MiB).
void scenario_shm_matches_gloo() {
  ddp_group* g = join(60000, "gloo");
  WCHECK(std::string(ddp_group_backend(g)) == "gloo", "asked for gloo, got %s", ddp_group_backend(g));
  const int world = ddp_group_size(g);
  const std::vector<Result> on_gloo = run_all(g);
  ddp_group_free(g);
  for (const std::string& setting : shm_settings()) {
    ScopedSetting in_env(setting);
    OneCpuIfAsked pinned;
    // Rank 0 hosts each group's store: the others join a new group once
    // the last one's server is surely gone (a client that reaches the old
    // one loses it mid-join).
    if (g_rank != 0) usleep(500 * 1000);
    g = join(60000, "shm");
    WCHECK(std::string(ddp_group_backend(g)) == "shm", "[%s] asked for shm, got %s", setting.c_str(),
           ddp_group_backend(g));
    compare_with_gloo(setting, run_all(g), on_gloo, world);
    ddp_group_free(g);
  }
}

// A killed rank's segment: nothing of it stays behind. The victim dies
// mid-loop; every survivor must get a status (not hang) and the memfd has
// no name anywhere, which the driver checks in /dev/shm.
void scenario_shm_peer_death() {
  ddp_group* g = join(20000, "shm");
  int rank = ddp_group_rank(g);
  int victim = env_int("DDP_TEST_VICTIM", 1);
  std::vector<float> big(3 << 20, 1.0f);  // 12 MiB: several pieces in flight
  int64_t shape[1] = {static_cast<int64_t>(big.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, big.data(), DDP_FLOAT32, shape, 1));
  auto [st, took] = all_reduce_until_failure(g, t, 1000000, [&](int it) {
    if (rank == victim && it == 5) kill(getpid(), SIGKILL);
  });
  WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
  WCHECK(took < 10.0, "the failure took %.2f s to notice", took);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// The root of 256 KiB broadcasts (its peers read most of them from its
// process, Segment::read_from, and it writes the rest into theirs,
// write_to), or with DDP_TEST_VICTIM that rank, is killed at a random
// moment, perhaps while a copy runs: every survivor gets DDP_E_PEER_FAILED
// within 10 s.
void scenario_shm_root_death_while_read() {
  ddp_group* g = join(20000, "shm");
  const int rank = ddp_group_rank(g), root = ddp_group_size(g) - 1;
  const int victim = env_int("DDP_TEST_VICTIM", root);
  std::vector<float> x(1 << 16, 1.0f);
  int64_t shape[1] = {static_cast<int64_t>(x.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, shape, 1));
  WOK(ddp_broadcast(g, t, root));
  if (rank == victim) {
    const int delay_ms = 20 + static_cast<int>(std::random_device{}() % 300);
    std::thread([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      raise(SIGKILL);
    }).detach();
  }
  ddp_status st = DDP_OK;
  auto t0 = std::chrono::steady_clock::now();
  int calls = 0;
  for (; st == DDP_OK && calls < 10000000; ++calls) {
    if (rank == root) x[static_cast<size_t>(calls) % x.size()] = static_cast<float>(calls);
    t0 = std::chrono::steady_clock::now();
    st = ddp_broadcast(g, t, root);
  }
  const double took = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] broadcast %d -> %s after %.2f s: %s\n", rank, calls, ddp_status_string(st), took,
               ddp_last_error_message());
  WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
  WCHECK(took < 10.0, "the failure took %.2f s to notice", took);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Broadcasts the ranks copy between their tensors (more than 32 KiB, where
// the root writes into its peers' memory) that do not match: a tensor
// smaller on one rank, and a rank naming another root. Every rank gets
// DDP_E_INVALID_ARGUMENT, nobody's memory past its tensor is written (a
// guard of 64 KiB after each), and a good broadcast works after.
void scenario_shm_copied_broadcast_mismatches() {
  ddp_group* g = join_then_set_timeout(5000);
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  WCHECK(std::string(ddp_group_backend(g)) == "shm", "the default backend is %s", ddp_group_backend(g));
  const size_t big = 64 << 10, small = 16 << 10, guard = 16 << 10;  // floats
  const float kGuard = -7.0f;
  std::vector<float> x(big + guard, kGuard);
  auto broadcast = [&](size_t n, int root, float value) {
    std::fill(x.begin(), x.begin() + static_cast<ptrdiff_t>(n), rank == root ? value : 0.0f);
    int64_t shape[1] = {static_cast<int64_t>(n)};
    ddp_tensor* t = nullptr;
    WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, shape, 1));
    ddp_status st = ddp_broadcast(g, t, root);
    ddp_tensor_free(t);
    return st;
  };
  auto guard_intact = [&](size_t n, const char* after) {
    size_t bad = 0;
    for (size_t i = n; i < x.size(); ++i) bad += x[i] != kGuard;
    WCHECK(bad == 0, "%s: %zu floats past the tensor's %zu were written", after, bad, n);
  };
  auto refused = [&](ddp_status st, const char* what) {
    WCHECK(st == DDP_E_INVALID_ARGUMENT, "%s: got %s: %s", what, ddp_status_string(st), ddp_last_error_message());
  };
  // Rank 1's tensor is a quarter of the others': the root (rank 0) must not
  // write its share of 256 KiB into it.
  refused(broadcast(rank == 1 ? small : big, 0, 1.0f), "a smaller tensor on rank 1");
  guard_intact(rank == 1 ? small : big, "the smaller tensor");
  // Rank 1 believes itself the root; the others name rank 0.
  refused(broadcast(big, rank == 1 ? 1 : 0, 2.0f), "another root on rank 1");
  guard_intact(big, "another root");
  // Rank 0 names the last rank as root; the others name rank 0.
  refused(broadcast(big, rank == 0 ? world - 1 : 0, 3.0f), "another root on rank 0");
  guard_intact(big, "another root on rank 0");
  WOK(broadcast(big, world - 1, 4.0f));
  size_t wrong = 0;
  for (size_t i = 0; i < big; ++i) wrong += x[i] != 4.0f;
  WCHECK(wrong == 0, "the broadcast after the mismatches: %zu of %zu floats wrong", wrong, big);
  guard_intact(big, "the good broadcast");
  ddp_group_free(g);
}

// A reducer of `n` parameters with gradient_as_bucket_view (on shm its
// buckets are shared memory), and in *views each gradient's view.
ddp_reducer* bucket_view_reducer(ddp_group* g, const FloatArrays& params, size_t n, std::vector<ddp_tensor*>* views) {
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.gradient_as_bucket_view = 1;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, params.tensors(), nullptr, n, &o));
  views->assign(n, nullptr);
  for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_gradient(red, i, &(*views)[i]));
  return red;
}

// Shared buckets (a reducer's gradient_as_bucket_view buckets on shm),
// attacked: a gradient view all-reduced on its own (a part of its bucket,
// at an offset); one rank reducing its view while the others reduce an
// ordinary tensor of the same size, and one a barrier while the others
// all-reduce (each refused on every rank, nothing combined, the group still
// usable and its next all-reduce right); then reducer steps until
// DDP_TEST_VICTIM (when set) kills itself: every survivor gets
// DDP_E_PEER_FAILED within 10 s.
void scenario_shm_shared_buckets() {
  ddp_group* g = join(20000, "shm");
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const std::vector<size_t> sizes = {1 << 20, 1000};  // one bucket: gradient 1, then 0 at 4000 bytes
  FloatArrays params(sizes, 0.0f);
  std::vector<ddp_tensor*> views;
  ddp_reducer* red = bucket_view_reducer(g, params, sizes.size(), &views);
  float* v0 = static_cast<float*>(ddp_tensor_data(views[0]));

  std::fill(v0, v0 + sizes[0], static_cast<float>(rank + 1));
  WOK(ddp_all_reduce(g, views[0], DDP_SUM));
  const float total = static_cast<float>(world * (world + 1) / 2);
  WCHECK(v0[0] == total && v0[sizes[0] - 1] == total, "view all-reduce: %g and %g, expected %g", v0[0],
         v0[sizes[0] - 1], total);

  std::vector<float> plain(sizes[0], 1.0f);
  int64_t shape[1] = {static_cast<int64_t>(sizes[0])};
  ddp_tensor* pt = nullptr;
  WOK(ddp_tensor_from_blob(&pt, plain.data(), DDP_FLOAT32, shape, 1));
  ddp_status st = ddp_all_reduce(g, rank == 0 ? views[0] : pt, DDP_SUM);
  WCHECK(st == DDP_E_INVALID_ARGUMENT && std::strstr(ddp_last_error_message(), "shared bucket"),
         "a shared bucket against an ordinary tensor: %s (%s)", ddp_status_string(st), ddp_last_error_message());
  WCHECK(v0[1] == total && plain[1] == 1.0f, "the refused call changed data: %g, %g", v0[1], plain[1]);
  // Values no earlier call left in the slots: a rank reading the wrong half
  // gets another sum.
  std::fill(plain.begin(), plain.end(), static_cast<float>(rank + 1));
  WOK(ddp_all_reduce(g, pt, DDP_SUM));
  WCHECK(plain[0] == total && plain[sizes[0] - 1] == total, "after the refusal: %g, expected %g", plain[0], total);
  // The same for a barrier against an all-reduce.
  st = rank == 0 ? ddp_barrier(g) : ddp_all_reduce(g, pt, DDP_SUM);
  WCHECK(st == DDP_E_INVALID_ARGUMENT, "a barrier against an all-reduce: %s", ddp_status_string(st));
  std::fill(plain.begin(), plain.end(), static_cast<float>(10 * (rank + 1)));
  WOK(ddp_all_reduce(g, pt, DDP_SUM));
  WCHECK(plain[0] == 10 * total && plain[sizes[0] - 1] == 10 * total, "after the barrier's refusal: %g, expected %g",
         plain[0], 10 * total);

  const int victim = env_int("DDP_TEST_VICTIM", -1);
  auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < 50; ++step) {
    if (rank == victim && step == 5) raise(SIGKILL);
    std::fill(v0, v0 + sizes[0], 1.0f);
    for (size_t i = sizes.size(); i-- > 0;) WOK(ddp_reducer_mark_ready(red, i));
    t0 = std::chrono::steady_clock::now();
    st = ddp_reducer_finish(red);
    if (st != DDP_OK) break;
    WCHECK(v0[0] == 1.0f, "step %d: the average of ones is %g", step, v0[0]);
  }
  if (victim >= 0) {
    WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
    WCHECK(seconds_since(t0) < 10.0, "the failure took %.2f s to notice", seconds_since(t0));
  } else {
    WCHECK(st == DDP_OK, "reducer steps: %s (%s)", ddp_status_string(st), ddp_last_error_message());
  }
  ddp_tensor_free(pt);
  for (auto* v : views) ddp_tensor_free(v);
  ddp_reducer_free(red);
  ddp_group_free(g);
}

// An async collective on caller memory that shm performs itself works on
// that memory as it is, with no copy: one it runs on the calling thread (at
// most 4 MiB, nothing queued before it) is over when the call returns, and
// the buffer holds the result before the wait (staged, as through Gloo, it
// would get it only at the wait, from libddp's copy; a mean divides at the
// wait). Queued behind a collective on the worker thread (an 8 MiB one,
// under DDP_SHM_INLINE=0) it is right after its wait, and a work freed
// unwaited there is waited for by the free: its memory, overwritten after
// the free, keeps what it was given.
void scenario_shm_async_at_once() {
  ddp_group* g = join(20000, "shm");
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const float total = static_cast<float>(world * (world + 1) / 2);
  std::vector<float> x(1000), rows(1000 * world);
  int64_t n[1] = {1000}, n_rows[1] = {1000 * world};
  ddp_tensor *t = nullptr, *out = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, n, 1));
  WOK(ddp_tensor_from_blob(&out, rows.data(), DDP_FLOAT32, n_rows, 1));
  auto expect_all = [&](const std::vector<float>& v, size_t first, size_t count, float want, const char* what) {
    for (size_t i = first; i < first + count; ++i)
      if (v[i] != want) {
        WCHECK(false, "%s: element %zu is %g, want %g", what, i, v[i], want);
        return;
      }
  };
  ddp_work* w = nullptr;
  std::fill(x.begin(), x.end(), static_cast<float>(rank + 1));
  WOK(ddp_all_reduce_async(g, t, DDP_SUM, &w));
  expect_all(x, 0, x.size(), total, "async all_reduce on caller memory, before its wait");
  WOK(ddp_work_wait(w, -1));
  expect_all(x, 0, x.size(), total, "async all_reduce on caller memory, after its wait");
  ddp_work_free(w);

  std::fill(x.begin(), x.end(), static_cast<float>(rank + 1));
  WOK(ddp_all_reduce_async(g, t, DDP_MEAN, &w));
  WOK(ddp_work_wait(w, -1));
  expect_all(x, 0, x.size(), total / static_cast<float>(world), "async mean on caller memory, after its wait");
  ddp_work_free(w);

  std::fill(x.begin(), x.end(), static_cast<float>(rank + 7));
  WOK(ddp_broadcast_async(g, t, world - 1, &w));
  expect_all(x, 0, x.size(), static_cast<float>(world - 1 + 7), "async broadcast on caller memory, before its wait");
  WOK(ddp_work_wait(w, -1));
  ddp_work_free(w);

  std::fill(x.begin(), x.end(), static_cast<float>(rank + 3));
  WOK(ddp_all_gather_into_tensor_async(g, t, out, &w));
  for (int r = 0; r < world; ++r)
    expect_all(rows, 1000 * r, 1000, static_cast<float>(r + 3), "async all_gather_into_tensor, before its wait");
  WOK(ddp_work_wait(w, -1));
  ddp_work_free(w);

  // Behind an 8 MiB all-reduce (on the worker under DDP_SHM_INLINE=0): the
  // small ones wait their turn on the worker.
  int64_t big_n[1] = {int64_t{2} << 20};
  ddp_tensor* big = nullptr;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  WOK(ddp_tensor_new(&big, DDP_FLOAT32, big_n, 1, cpu));
  std::fill_n(static_cast<float*>(ddp_tensor_data(big)), big_n[0], 1.0f);
  for (int k = 0; k < 20; ++k) {
    ddp_work *wb = nullptr, *ws = nullptr, *unwaited = nullptr;
    WOK(ddp_all_reduce_async(g, big, DDP_SUM, &wb));
    std::fill(x.begin(), x.end(), static_cast<float>(rank + 1 + k));
    WOK(ddp_all_reduce_async(g, t, DDP_SUM, &ws));
    std::vector<float> y(1000, static_cast<float>(rank));
    ddp_tensor* ty = nullptr;
    WOK(ddp_tensor_from_blob(&ty, y.data(), DDP_FLOAT32, n, 1));
    WOK(ddp_all_reduce_async(g, ty, DDP_SUM, &unwaited));
    ddp_work_free(unwaited);  // y is not touched after this, wherever the all-reduce ran
    ddp_tensor_free(ty);
    y.assign(y.size(), -1.0f);
    WOK(ddp_work_wait(wb, -1));
    WOK(ddp_work_wait(ws, -1));
    expect_all(x, 0, x.size(), total + static_cast<float>(world * k), "async all_reduce behind an 8 MiB one");
    expect_all(y, 0, y.size(), -1.0f, "memory of a work freed unwaited");
    ddp_work_free(wb);
    ddp_work_free(ws);
  }
  WOK(ddp_barrier(g));
  for (ddp_tensor* x_ : {t, out, big}) ddp_tensor_free(x_);
  ddp_group_free(g);
}

// A broadcast of at most 4 KiB returns on its root once posted. Attacked:
// roots taking turns, posted broadcasts (in the entry's line and after it)
// between broadcasts through the barrier and gathers, each value new,
// so that a rank reading a stale half gets a wrong one; every rank calling
// itself the root, and the root's broadcast against the others'
// all-reduce: the root returns, and its next call fails on every rank
// (DDP_E_INVALID_ARGUMENT naming the posted broadcast), the group usable
// after; the same two calls after the root's run ahead (its post ring);
// every rank the root of a run of posts (the 25th fails everywhere); the
// peers taking posts while another peer sleeps (3 or more ranks);
// then DDP_TEST_VICTIM (when set) kills itself while rank 0 posts
// broadcasts: every survivor gets DDP_E_PEER_FAILED within 10 s.
void scenario_shm_posted_broadcast() {
  ddp_group* g = join(20000, "shm");
  const int rank = ddp_group_rank(g), world = ddp_group_size(g);
  float word = 0;
  // 4 B: posted in the entry's line; 4 KiB: posted after it, streamed (the most a
  // post carries); 4 KiB + 4 B: through the barrier.
  std::vector<float> row(1024, 0.0f), wide(1025, 0.0f);
  int64_t n_row[1] = {1024}, n_wide[1] = {1025};
  ddp_tensor *w = nullptr, *r = nullptr, *wt = nullptr;
  WOK(ddp_tensor_from_blob(&w, &word, DDP_FLOAT32, nullptr, 0));
  WOK(ddp_tensor_from_blob(&r, row.data(), DDP_FLOAT32, n_row, 1));
  WOK(ddp_tensor_from_blob(&wt, wide.data(), DDP_FLOAT32, n_wide, 1));
  for (int k = 0; k < 300; ++k) {
    const int root = (k / 3) % world;  // each root posts three in a row
    const float v = static_cast<float>(1000 * k + root);
    word = rank == root ? v : -1.0f;
    for (size_t i = 0; i < row.size(); ++i) row[i] = rank == root ? v + 0.5f + static_cast<float>(i) : -1.0f;
    std::fill(wide.begin(), wide.end(), rank == root ? v + 0.25f : -1.0f);
    WOK(ddp_broadcast(g, w, root));
    WOK(ddp_broadcast(g, r, root));
    if (k % 2) WOK(ddp_broadcast(g, wt, root));
    size_t wrong = 0;  // the first element that differs, if any
    while (wrong < row.size() && row[wrong] == v + 0.5f + static_cast<float>(wrong)) ++wrong;
    WCHECK(word == v && wrong == row.size(), "call %d: got %g, and element %zu of 1024 wrong, from root %d, sent %g",
           k, word, wrong, root, v);
    if (k % 2)
      WCHECK(wide[0] == v + 0.25f && wide.back() == v + 0.25f, "call %d: the barrier's broadcast got %g", k,
             wide.back());
    if (k % 3 == 2) {
      word = static_cast<float>(rank + k);
      ddp_tensor* all = nullptr;
      WOK(ddp_all_gather(g, w, &all));
      const float* got = static_cast<const float*>(ddp_tensor_data(all));
      for (int j = 0; j < world; ++j)
        WCHECK(got[j] == static_cast<float>(j + k), "call %d: rank %d gathered %g", k, j, got[j]);
      ddp_tensor_free(all);
    }
  }
  auto expect_refused = [&](ddp_status st, const char* what, const char* mention) {
    WCHECK(st == DDP_E_INVALID_ARGUMENT, "%s: got %s: %s", what, ddp_status_string(st), ddp_last_error_message());
    WCHECK(std::strstr(ddp_last_error_message(), mention) != nullptr, "%s: message lacks '%s': %s", what, mention,
           ddp_last_error_message());
  };
  auto expect_sum_works = [&](const char* after) {
    word = static_cast<float>(rank + 1);
    ddp_status st = ddp_all_reduce(g, w, DDP_SUM);
    WCHECK(st == DDP_OK && word == static_cast<float>(world * (world + 1) / 2), "all_reduce after %s: %s, %g", after,
           ddp_status_string(st), word);
  };
  // Every rank the root: each posts, nobody waits.
  WOK(ddp_broadcast(g, w, rank));
  expect_refused(ddp_all_reduce(g, w, DDP_SUM), "the call after every rank's own broadcast", "posted as broadcast");
  expect_sum_works("the roots' refusal");
  // Rank 0's broadcast against the others' all-reduce: they fail at once.
  ddp_status st = rank == 0 ? ddp_broadcast(g, w, 0) : ddp_all_reduce(g, w, DDP_SUM);
  if (rank == 0) WCHECK(st == DDP_OK, "the posting root: %s", ddp_status_string(st));
  else expect_refused(st, "an all-reduce against a broadcast", "broadcast root 0");
  expect_refused(ddp_all_reduce(g, w, DDP_SUM), "the call after the refused broadcast",
                 rank == 0 ? "posted as broadcast" : "no call");
  expect_sum_works("the kinds' refusal");
  // A root that runs ahead: rank 0 posts three broadcasts, the others make
  // an all-reduce of the second (which fails on them at once). Rank 0 did
  // not wait, so it learns of it from their report when it next looks:
  // at its third broadcast or at the all-reduce after it, and that call
  // fails on every rank, the others' included; the one before it runs.
  // Where rank 0 lingers before its third broadcast, the report is there
  // by then and the third is the one that fails.
  auto run_ahead = [&](bool root_lingers) {
    word = 7.0f;
    WOK(ddp_broadcast(g, w, 0));
    ddp_status s2 = rank == 0 ? ddp_broadcast(g, w, 0) : ddp_all_reduce(g, w, DDP_SUM);
    if (rank == 0) WCHECK(s2 == DDP_OK, "the second posted broadcast: %s", ddp_status_string(s2));
    else expect_refused(s2, "an all-reduce against the second of three posts", "broadcast root 0");
    if (rank == 0 && root_lingers) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    word = rank == 0 ? 9.0f : -1.0f;
    const ddp_status third = ddp_broadcast(g, w, 0);
    if (third == DDP_OK) WCHECK(word == 9.0f, "the third broadcast ran but brought %g", word);
    else expect_refused(third, "the third broadcast", rank == 0 ? "posted as broadcast" : "no call");
    if (root_lingers) WCHECK(third != DDP_OK, "the third broadcast ran after rank 0 lingered");
    const ddp_status after = ddp_all_reduce(g, w, DDP_SUM);
    if (third == DDP_OK)
      expect_refused(after, "the all-reduce after the posts", rank == 0 ? "posted as broadcast" : "no call");
    else
      WCHECK(after == DDP_OK, "the all-reduce after the refused third broadcast: %s", ddp_status_string(after));
    // The same call failed on every rank.
    word = third == DDP_OK ? 1.0f : 0.0f;
    WOK(ddp_all_reduce(g, w, DDP_SUM));
    WCHECK(word == 0.0f || word == static_cast<float>(world), "the third broadcast ran on %g of %d ranks", word,
           world);
  };
  run_ahead(false);
  run_ahead(true);
  expect_sum_works("the run-ahead refusal");

  // Every rank the root of a run of broadcasts: nobody awaits a post, so
  // nobody reports one; each root compares every rank's call of its post
  // 24 calls back (Segment::kPostDepth), so the 25th fails on every rank.
  int failed_at = -1;
  for (int k = 0; k < 64 && failed_at < 0; ++k) {
    const ddp_status s = ddp_broadcast(g, w, rank);
    if (s == DDP_OK) continue;
    expect_refused(s, "a run of broadcasts that every rank roots", "posted as broadcast");
    failed_at = k;
  }
  WCHECK(failed_at == 24, "a run of broadcasts that every rank roots failed at call %d, not at the 25th", failed_at);
  expect_sum_works("the run of roots' refusal");

  // A peer of posted broadcasts waits for the root alone: while the last
  // rank sleeps, the others take three posts, then it takes them too.
  if (world >= 3) {
    const int slow = world - 1;
    const auto start = std::chrono::steady_clock::now();
    if (rank == slow) std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    float got[3];
    for (int k = 0; k < 3; ++k) {
      word = rank == 0 ? 100.0f + k : -1.0f;
      WOK(ddp_broadcast(g, w, 0));
      got[k] = word;
    }
    const double took = seconds_since(start);
    for (int k = 0; k < 3; ++k) WCHECK(got[k] == 100.0f + k, "post %d behind a sleeping peer brought %g", k, got[k]);
    if (rank != slow)
      WCHECK(took < 0.75, "rank %d took %.2f s for three posted broadcasts: it waited for the sleeping rank %d", rank,
             took, slow);
    expect_sum_works("the posts behind a sleeping peer");
  }

  const int victim = env_int("DDP_TEST_VICTIM", -1);
  auto t0 = std::chrono::steady_clock::now();
  st = DDP_OK;
  for (int k = 0; k < 100000 && st == DDP_OK; ++k) {
    if (rank == victim && k == 50) raise(SIGKILL);
    if (k == 50) t0 = std::chrono::steady_clock::now();
    st = ddp_broadcast(g, w, 0);
  }
  if (victim >= 0) {
    WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
    WCHECK(seconds_since(t0) < 10.0, "the failure took %.2f s to notice", seconds_since(t0));
  }
  ddp_tensor_free(w);
  ddp_tensor_free(r);
  ddp_tensor_free(wt);
  ddp_group_free(g);
}

// Faults at a random moment of shared-bucket work: a loop that makes a
// reducer with shared buckets (static_graph: the first step reduces them
// all inside its finish), reduces in them and has rank 0
// post broadcasts, while DDP_TEST_VICTIM kills (DDP_TEST_FAULT=kill) or
// stops (stop) itself after a random delay of up to 400 ms, wherever it is
// then: making a segment through the store (the store host too, as rank
// 0), in a shared reduce, or behind a posted broadcast. Every survivor's
// failing call must end within twice the group's timeout with
// DDP_E_PEER_FAILED or DDP_E_TIMEOUT and a message, and freeing the
// reducer and the group must return; a stopped victim is then killed.
void scenario_shm_shared_bucket_faults() {
  const int timeout_ms = 3000;
  ddp_group* g = join(timeout_ms, "shm");
  const int rank = ddp_group_rank(g);
  const int victim = env_int("DDP_TEST_VICTIM", 1);
  const char* fault = std::getenv("DDP_TEST_FAULT");
  const bool stop = fault && std::strcmp(fault, "stop") == 0;
  int64_t pid = getpid();
  ddp_tensor* pt = nullptr;
  WOK(ddp_tensor_from_blob(&pt, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_broadcast(g, pt, victim));  // the survivors learn whom to kill once it is stopped
  if (rank == victim) {
    const int delay_ms = static_cast<int>(std::random_device{}() % 400);
    std::fprintf(stderr, "[rank %d] %s in %d ms\n", rank, stop ? "stopping" : "dying", delay_ms);
    std::thread([=] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      raise(stop ? SIGSTOP : SIGKILL);
    }).detach();
  }
  const std::vector<size_t> sizes = {1 << 18, 1000, 5000};
  FloatArrays params(sizes, 0.0f);
  float word = 0;
  ddp_tensor* w = nullptr;
  WOK(ddp_tensor_from_blob(&w, &word, DDP_FLOAT32, nullptr, 0));
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.gradient_as_bucket_view = 1;
  o.static_graph = 1;
  ddp_status st = DDP_OK;
  const char* failed_in = "nothing";
  double took = 0;
  auto call = [&](const char* what, const std::function<ddp_status()>& fn) {
    if (st != DDP_OK) return;
    auto t0 = std::chrono::steady_clock::now();
    st = fn();
    took = seconds_since(t0);
    failed_in = what;
  };
  ddp_reducer* red = nullptr;
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; st == DDP_OK && seconds_since(start) < 20; ++it) {
    call("ddp_reducer_new", [&] { return ddp_reducer_new(&red, g, params.tensors(), nullptr, sizes.size(), &o); });
    for (int step = 0; step < 3 && st == DDP_OK; ++step) {
      for (size_t i = sizes.size(); i-- > 0;) call("ddp_reducer_mark_ready", [&] { return ddp_reducer_mark_ready(red, i); });
      call("ddp_reducer_finish", [&] { return ddp_reducer_finish(red); });
      for (int k = 0; k < 3; ++k) {
        word = rank == 0 ? static_cast<float>(it) : -1.0f;
        call("ddp_broadcast", [&] { return ddp_broadcast(g, w, 0); });
        WCHECK(st != DDP_OK || word == static_cast<float>(it), "broadcast %d: got %g", it, word);
      }
    }
    if (st == DDP_OK) {
      ddp_reducer_free(red);
      red = nullptr;
    }
  }
  std::fprintf(stderr, "[rank %d] %s -> %s after %.2f s: %s\n", rank, failed_in, ddp_status_string(st), took,
               ddp_last_error_message());
  WCHECK(st == DDP_E_PEER_FAILED || st == DDP_E_TIMEOUT, "%s: expected DDP_E_PEER_FAILED or DDP_E_TIMEOUT, got %s",
         failed_in, ddp_status_string(st));
  WCHECK(took < 2.0 * timeout_ms / 1000 + 1, "%s took %.2f s to fail (timeout %d ms)", failed_in, took, timeout_ms);
  WCHECK(std::strlen(ddp_last_error_message()) > 0, "%s failed without a message", failed_in);
  // Only the victim is ever found dead: a survivor that failed first (on
  // the store, say) told the segment why before it went on and exited.
  for (int r = 0; r < ddp_group_size(g); ++r) {
    const std::string found_dead = "rank " + std::to_string(r) + " (pid";
    WCHECK(r == victim || !std::strstr(ddp_last_error_message(), found_dead.c_str()), "%s blames a survivor: %s",
           failed_in, ddp_last_error_message());
  }
  // The group is broken now: another reducer is refused at once (and a
  // store connection whose read timed out is closed, not read out of step).
  {
    auto t1 = std::chrono::steady_clock::now();
    ddp_reducer* another = nullptr;
    ddp_status again = ddp_reducer_new(&another, g, params.tensors(), nullptr, sizes.size(), &o);
    std::fprintf(stderr, "[rank %d] another reducer -> %s after %.2f s: %s\n", rank, ddp_status_string(again),
                 seconds_since(t1), ddp_last_error_message());
    WCHECK(again != DDP_OK && seconds_since(t1) < 1.0, "another reducer on the broken group: %s after %.2f s",
           ddp_status_string(again), seconds_since(t1));
    ddp_reducer_free(another);
  }
  if (stop && rank == (victim == 0 ? 1 : 0)) kill(static_cast<pid_t>(pid), SIGKILL);
  auto t0 = std::chrono::steady_clock::now();
  ddp_reducer_free(red);
  ddp_tensor_free(w);
  ddp_tensor_free(pt);
  ddp_group_free(g);
  WCHECK(seconds_since(t0) < 2.0 * timeout_ms / 1000 + 1, "freeing the reducer and the group took %.2f s",
         seconds_since(t0));
}

// A rank stopped (SIGSTOP) while rank 0 posts broadcasts, timeout 3 s:
// every survivor gets DDP_E_TIMEOUT within twice that, and its message
// names the stopped rank as the one waited for, also where a survivor
// waited for rank 0 alone and rank 0 for the stopped rank (Segment::
// waits_behind). A survivor then kills the stopped rank.
void scenario_shm_stalled_peer() {
  const int timeout_ms = 3000;
  ddp_group* g = join_then_set_timeout(timeout_ms, "shm");
  const int rank = ddp_group_rank(g);
  const int victim = env_int("DDP_TEST_VICTIM", 1);
  int64_t pid = getpid();
  float word = 0;
  ddp_tensor *pt = nullptr, *w = nullptr;
  WOK(ddp_tensor_from_blob(&pt, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_tensor_from_blob(&w, &word, DDP_FLOAT32, nullptr, 0));
  WOK(ddp_broadcast(g, pt, victim));  // the survivors learn whom to kill once it is stopped
  ddp_status st = DDP_OK;
  auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < 1000000 && st == DDP_OK; ++k) {
    if (rank == victim && k == 1000) raise(SIGSTOP);
    t0 = std::chrono::steady_clock::now();
    st = ddp_broadcast(g, w, 0);
  }
  const double took = seconds_since(t0);
  const std::string message = ddp_last_error_message();
  std::fprintf(stderr, "[rank %d] %s after %.2f s: %s\n", rank, ddp_status_string(st), took, message.c_str());
  WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(took < 2.0 * timeout_ms / 1000 + 1, "the failing broadcast took %.2f s (timeout %d ms)", took, timeout_ms);
  const std::string blamed = "for rank " + std::to_string(victim) + " (slow, stopped";
  WCHECK(message.find(blamed) != std::string::npos, "the message does not end its chain of waits at the stopped rank %d: %s",
         victim, message.c_str());
  if (rank == (victim == 0 ? 1 : 0)) kill(static_cast<pid_t>(pid), SIGKILL);
  ddp_tensor_free(w);
  ddp_tensor_free(pt);
  ddp_group_free(g);
}

// Shared buckets across teardowns: three groups in turn on the same
// MASTER_PORT, each with a reducer whose buckets are shared memory (new
// segments, made through each group's store), two steps each with values
// no other cycle uses; the last cycle frees the group's handle before its
// reducer, which keeps the group alive and still averages.
void scenario_shm_shared_buckets_rejoin() {
  const std::vector<size_t> sizes = {1 << 18, 1000};
  for (int cycle = 0; cycle < 3; ++cycle) {
    ddp_group* g = join(10000, "shm");
    const int rank = ddp_group_rank(g), world = ddp_group_size(g);
    FloatArrays params(sizes, 0.0f);
    std::vector<ddp_tensor*> views;
    ddp_reducer* red = bucket_view_reducer(g, params, sizes.size(), &views);
    if (cycle == 2) ddp_group_free(g);  // the reducer holds the group
    for (int step = 0; step < 2; ++step) {
      const float base = static_cast<float>(100 * cycle + 10 * step);
      for (size_t i = 0; i < sizes.size(); ++i) {
        float* v = static_cast<float*>(ddp_tensor_data(views[i]));
        std::fill(v, v + sizes[i], base + static_cast<float>(2 * (rank + 1)));
      }
      for (size_t i = sizes.size(); i-- > 0;) WOK(ddp_reducer_mark_ready(red, i));
      WOK(ddp_reducer_finish(red));
      const float want = base + static_cast<float>(world + 1);  // the average of 2, 4, ..., 2 * world
      for (size_t i = 0; i < sizes.size(); ++i) {
        const float* v = static_cast<const float*>(ddp_tensor_data(views[i]));
        WCHECK(v[0] == want && v[sizes[i] - 1] == want, "cycle %d step %d gradient %zu: %g, expected %g", cycle, step,
               i, v[sizes[i] - 1], want);
      }
    }
    for (auto* v : views) ddp_tensor_free(v);
    ddp_reducer_free(red);
    if (cycle != 2) ddp_group_free(g);
  }
}

// A wait that went to sleep is woken by the barrier of the peer it waits
// for, not by the end of its sleep slice (2 ms): in each of 30 barriers
// rank 0 waits for ranks that come 3 ms late (long past its spin and
// yields), and the ranks then all-reduce (MAX) the time the last of them
// entered. Rank 0 left within 0.5 ms of it in most barriers; were the
// wakes lost, it would leave about 1 ms late (at its next slice) in all.
// Raising the phase looks for sleepers with a light fence where the
// sleepers make the heavy one (Segment::raise_phase): DDP_SHM_LIGHT_WAKES=0
// runs the full-fence way.
void scenario_shm_sleeping_wait_wakes() {
  ddp_group* g = join(10000, "shm");
  const int rank = ddp_group_rank(g);
  auto now_ns = [] {
    return static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
  };
  int64_t entered = 0;
  int64_t shape[1] = {1};
  ddp_tensor* last = nullptr;
  WOK(ddp_tensor_from_blob(&last, &entered, DDP_INT64, shape, 1));
  std::vector<double> lags_us;
  for (int i = 0; i < 30; ++i) {
    entered = 0;
    if (rank != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      entered = now_ns();
    }
    WOK(ddp_barrier(g));
    const int64_t left = now_ns();
    WOK(ddp_all_reduce(g, last, DDP_MAX));
    if (rank == 0) lags_us.push_back(static_cast<double>(left - entered) / 1e3);
  }
  if (rank == 0) {
    std::sort(lags_us.begin(), lags_us.end());
    const double median = lags_us[lags_us.size() / 2];
    std::fprintf(stderr, "[rank 0] woken %.0f us (median), %.0f to %.0f us after the last peer's barrier\n", median,
                 lags_us.front(), lags_us.back());
    WCHECK(median < 500, "a sleeping wait left %.0f us (median) after its peers' barrier: woken by its sleep slice, "
                         "not by them", median);
  }
  ddp_tensor_free(last);
  ddp_group_free(g);
}

}  // namespace

WORKER_SCENARIO("shm_sleeping_wait_wakes", scenario_shm_sleeping_wait_wakes);
WORKER_SCENARIO("shm_shared_buckets", scenario_shm_shared_buckets);
WORKER_SCENARIO("shm_posted_broadcast", scenario_shm_posted_broadcast);
WORKER_SCENARIO("shm_async_at_once", scenario_shm_async_at_once);
WORKER_SCENARIO("shm_stalled_peer", scenario_shm_stalled_peer);
WORKER_SCENARIO("shm_shared_bucket_faults", scenario_shm_shared_bucket_faults);
WORKER_SCENARIO("shm_shared_buckets_rejoin", scenario_shm_shared_buckets_rejoin);
WORKER_SCENARIO("shm_matches_gloo", scenario_shm_matches_gloo);
WORKER_SCENARIO("shm_peer_death", scenario_shm_peer_death);
WORKER_SCENARIO("shm_root_death_while_read", scenario_shm_root_death_while_read);
WORKER_SCENARIO("shm_copied_broadcast_mismatches", scenario_shm_copied_broadcast_mismatches);
