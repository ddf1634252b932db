// One rank of a multi-process test. Usage: mp_worker <scenario> [args...]
// The environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, ...) comes
// from the launcher. Exit code 0 means every check of the scenario held.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>

#include "worker_util.h"

namespace worker {
int g_failures = 0;
int g_rank = -1;
}  // namespace worker

using namespace worker;

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

ddp_group* join(int64_t timeout_ms = 0) {
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = timeout_ms;
  ddp_group* g = nullptr;
  ddp_status s = ddp_group_init(&g, nullptr, &o);
  if (s != DDP_OK) {
    std::fprintf(stderr, "[rank %d] ddp_group_init: %s: %s\n", g_rank, ddp_status_string(s),
                 ddp_last_error_message());
    std::exit(3);
  }
  return g;
}

// Input element i of rank r: small integers, exact in every dtype.
double input_value(ddp_dtype d, int r, size_t i) {
  double v = static_cast<double>((r * 7 + static_cast<int>(i) * 3) % 5) - 1;  // -1..3
  if (d == DDP_UINT8) v = std::fabs(v);
  if (d == DDP_BOOL) v = v > 0.5 ? 1 : 0;
  return v;
}

double reduce_ref(ddp_dtype d, ddp_reduce_op op, int world, size_t i) {
  double acc = input_value(d, 0, i);
  for (int r = 1; r < world; ++r) {
    double v = input_value(d, r, i);
    switch (op) {
      case DDP_SUM: case DDP_MEAN: acc += v; break;
      case DDP_MIN: acc = std::min(acc, v); break;
      case DDP_MAX: acc = std::max(acc, v); break;
      case DDP_PRODUCT: acc *= v; break;
    }
  }
  if (d == DDP_BOOL) return acc != 0 ? 1 : 0;  // sums saturate to true
  if (op == DDP_MEAN) return is_float(d) ? acc / world : std::trunc(acc / world);
  return acc;
}

std::vector<char> make_input(ddp_dtype d, int r, size_t n) {
  std::vector<char> buf(n * ddp_dtype_size(d) + 16);
  for (size_t i = 0; i < n; ++i) store(d, buf.data(), i, input_value(d, r, i));
  return buf;
}

const char* op_name(ddp_reduce_op op) {
  static const char* names[] = {"sum", "mean", "min", "max", "product"};
  return names[op];
}

// Every collective x every dtype, blocking and async.
void scenario_collectives() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const size_t n = 37;
  int64_t shape[1] = {static_cast<int64_t>(n)};

  for (ddp_dtype d : kAllDtypes) {
    const char* dn = ddp_dtype_name(d);
    // all_reduce, blocking, every op.
    for (ddp_reduce_op op : {DDP_SUM, DDP_MEAN, DDP_MIN, DDP_MAX, DDP_PRODUCT}) {
      auto buf = make_input(d, rank, n);
      ddp_tensor* t = nullptr;
      WOK(ddp_tensor_from_blob(&t, buf.data(), d, shape, 1));
      WOK(ddp_all_reduce(g, t, op));
      for (size_t i = 0; i < n; ++i) {
        double want = reduce_ref(d, op, world, i), got = load(d, buf.data(), i);
        WCHECK(got == want, "all_reduce %s %s [%zu]: got %g want %g", dn, op_name(op), i, got, want);
        if (got != want) break;
      }
      ddp_tensor_free(t);
    }
    // all_reduce async: two in flight, waited in order.
    {
      auto a = make_input(d, rank, n), b = make_input(d, rank, n);
      ddp_tensor *ta = nullptr, *tb = nullptr;
      ddp_work *wa = nullptr, *wb = nullptr;
      WOK(ddp_tensor_from_blob(&ta, a.data(), d, shape, 1));
      WOK(ddp_tensor_from_blob(&tb, b.data(), d, shape, 1));
      WOK(ddp_all_reduce_async(g, ta, DDP_SUM, &wa));
      WOK(ddp_all_reduce_async(g, tb, DDP_MAX, &wb));
      WOK(ddp_work_wait(wa, -1));
      WOK(ddp_work_wait(wb, 10000));
      for (size_t i = 0; i < n; ++i) {
        WCHECK(load(d, a.data(), i) == reduce_ref(d, DDP_SUM, world, i), "async sum %s [%zu]", dn, i);
        WCHECK(load(d, b.data(), i) == reduce_ref(d, DDP_MAX, world, i), "async max %s [%zu]", dn, i);
      }
      ddp_work_free(wa);
      ddp_work_free(wb);
      ddp_tensor_free(ta);
      ddp_tensor_free(tb);
    }
    // reduce to the last rank.
    {
      int dst = world - 1;
      auto buf = make_input(d, rank, n);
      ddp_tensor* t = nullptr;
      WOK(ddp_tensor_from_blob(&t, buf.data(), d, shape, 1));
      WOK(ddp_reduce(g, t, dst, DDP_SUM));
      if (rank == dst)
        for (size_t i = 0; i < n; ++i)
          WCHECK(load(d, buf.data(), i) == reduce_ref(d, DDP_SUM, world, i), "reduce %s [%zu]", dn, i);
      ddp_tensor_free(t);
    }
    // broadcast from the last rank, blocking and async.
    for (int async = 0; async < 2; ++async) {
      int src = world - 1;
      auto buf = make_input(d, rank, n);
      ddp_tensor* t = nullptr;
      WOK(ddp_tensor_from_blob(&t, buf.data(), d, shape, 1));
      if (async) {
        ddp_work* w = nullptr;
        WOK(ddp_broadcast_async(g, t, src, &w));
        WOK(ddp_work_wait(w, -1));
        ddp_work_free(w);
      } else {
        WOK(ddp_broadcast(g, t, src));
      }
      for (size_t i = 0; i < n; ++i)
        WCHECK(load(d, buf.data(), i) == input_value(d, src, i), "broadcast %s [%zu]", dn, i);
      ddp_tensor_free(t);
    }
    // all_gather: (3, 2) per rank -> (world, 3, 2).
    {
      int64_t s2[2] = {3, 2};
      auto buf = make_input(d, rank, 6);
      ddp_tensor *t = nullptr, *out = nullptr;
      WOK(ddp_tensor_from_blob(&t, buf.data(), d, s2, 2));
      WOK(ddp_all_gather(g, t, &out));
      WCHECK(ddp_tensor_ndim(out) == 3 && ddp_tensor_shape(out)[0] == world &&
                 ddp_tensor_shape(out)[1] == 3 && ddp_tensor_shape(out)[2] == 2,
             "all_gather %s shape", dn);
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < 6; ++i)
          WCHECK(load(d, ddp_tensor_data(out), r * 6 + i) == input_value(d, r, i), "all_gather %s", dn);
      ddp_tensor_free(out);
      ddp_tensor_free(t);
    }
    // all_gather_uneven: rank r has shape (r + 1, 3 - r % 2).
    {
      int64_t s2[2] = {rank + 1, 3 - rank % 2};
      size_t cnt = static_cast<size_t>(s2[0] * s2[1]);
      auto buf = make_input(d, rank, cnt);
      ddp_tensor* t = nullptr;
      std::vector<ddp_tensor*> parts(world, nullptr);
      WOK(ddp_tensor_from_blob(&t, buf.data(), d, s2, 2));
      WOK(ddp_all_gather_uneven(g, t, parts.data()));
      for (int r = 0; r < world; ++r) {
        const int64_t* sh = ddp_tensor_shape(parts[r]);
        WCHECK(sh && sh[0] == r + 1 && sh[1] == 3 - r % 2, "uneven %s shape of rank %d", dn, r);
        size_t c = static_cast<size_t>((r + 1) * (3 - r % 2));
        for (size_t i = 0; sh && i < c; ++i)
          WCHECK(load(d, ddp_tensor_data(parts[r]), i) == input_value(d, r, i), "uneven %s r%d [%zu]", dn, r, i);
        ddp_tensor_free(parts[r]);
      }
      ddp_tensor_free(t);
    }
  }

  // all_gather_uneven async, scalars, and equal shapes.
  {
    double v = rank * 1.5;
    ddp_tensor* t = nullptr;
    ddp_work* w = nullptr;
    WOK(ddp_tensor_from_blob(&t, &v, DDP_FLOAT64, nullptr, 0));
    WOK(ddp_all_gather_uneven_async(g, t, &w));
    WOK(ddp_work_wait(w, -1));
    WCHECK(ddp_work_result_count(w) == static_cast<size_t>(world), "uneven async count");
    for (int r = 0; r < world; ++r) {
      ddp_tensor* p = nullptr;
      WOK(ddp_work_result_tensor(w, r, &p));
      WCHECK(ddp_tensor_ndim(p) == 0 && *static_cast<double*>(ddp_tensor_data(p)) == r * 1.5,
             "uneven scalar of rank %d", r);
      ddp_tensor_free(p);
    }
    ddp_work_free(w);
    ddp_tensor_free(t);
  }
  // broadcast_bytes: empty, small, 1 MiB; blocking and async.
  for (size_t len : {size_t(0), size_t(5), size_t(1) << 20}) {
    int src = world > 1 ? 1 : 0;
    std::vector<uint8_t> data(len);
    for (size_t i = 0; i < len; ++i) data[i] = static_cast<uint8_t>(i * 31 + 7);
    ddp_buffer* out = nullptr;
    WOK(ddp_broadcast_bytes(g, rank == src ? data.data() : nullptr, rank == src ? len : 0, src, &out));
    WCHECK(ddp_buffer_size(out) == len, "broadcast_bytes size %zu vs %zu", ddp_buffer_size(out), len);
    WCHECK(len == 0 || std::memcmp(ddp_buffer_data(out), data.data(), len) == 0, "broadcast_bytes payload");
    ddp_buffer_free(out);
    ddp_work* w = nullptr;
    WOK(ddp_broadcast_bytes_async(g, data.data(), len, src, &w));
    WOK(ddp_work_wait(w, -1));
    WOK(ddp_work_result_buffer(w, &out));
    WCHECK(ddp_buffer_size(out) == len, "broadcast_bytes async size");
    ddp_buffer_free(out);
    ddp_work_free(w);
  }
  // reduce_boolean_decision.
  for (int all = 0; all < 2; ++all) {
    int out = -1;
    WOK(ddp_reduce_boolean_decision(g, 1, all, &out));
    WCHECK(out == 1, "everyone yes, all=%d", all);
    WOK(ddp_reduce_boolean_decision(g, rank == 0, all, &out));
    WCHECK(out == (all ? (world == 1) : 1), "only rank 0 yes, all=%d: %d", all, out);
    WOK(ddp_reduce_boolean_decision(g, 0, all, &out));
    WCHECK(out == 0, "everyone no, all=%d", all);
    ddp_work* w = nullptr;
    WOK(ddp_reduce_boolean_decision_async(g, rank != 0, all, &w));
    WOK(ddp_work_wait(w, -1));
    WOK(ddp_work_result_decision(w, &out));
    WCHECK(out == (all ? (world == 1 ? 0 : 0) : (world > 1)), "all but rank 0, all=%d: %d", all, out);
    ddp_work_free(w);
  }
  // barrier, blocking and async.
  WOK(ddp_barrier(g));
  ddp_work* w = nullptr;
  WOK(ddp_barrier_async(g, &w));
  WOK(ddp_work_wait(w, -1));
  ddp_work_free(w);
  ddp_group_free(g);
}

// Bad input: a clear DDP_E_INVALID_ARGUMENT, nothing crashes, the group stays usable.
void scenario_invalid() {
  ddp_group* g = join(30000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  float x[4] = {1, 2, 3, 4};
  int64_t s[1] = {4};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, s, 1));
  WCHECK(ddp_all_reduce(nullptr, t, DDP_SUM) == DDP_E_INVALID_ARGUMENT, "NULL group");
  WCHECK(ddp_all_reduce(g, nullptr, DDP_SUM) == DDP_E_INVALID_ARGUMENT, "NULL tensor");
  WCHECK(ddp_all_reduce(g, t, static_cast<ddp_reduce_op>(42)) == DDP_E_INVALID_ARGUMENT, "bad op");
  WCHECK(std::strstr(ddp_last_error_message(), "reduce op") != nullptr, "message: %s", ddp_last_error_message());
  WCHECK(ddp_broadcast(g, t, world) == DDP_E_INVALID_ARGUMENT, "src == world");
  WCHECK(std::strstr(ddp_last_error_message(), "src") != nullptr, "message: %s", ddp_last_error_message());
  WCHECK(ddp_broadcast(g, t, -1) == DDP_E_INVALID_ARGUMENT, "src -1");
  WCHECK(ddp_reduce(g, t, world + 3, DDP_SUM) == DDP_E_INVALID_ARGUMENT, "dst out of range");
  ddp_tensor* freed = nullptr;
  WOK(ddp_tensor_from_blob(&freed, x, DDP_FLOAT32, s, 1));
  ddp_tensor_free(freed);
  WCHECK(ddp_all_reduce(g, freed, DDP_SUM) == DDP_E_INVALID_ARGUMENT, "freed tensor");
  WCHECK(std::strstr(ddp_last_error_message(), "freed") != nullptr, "message: %s", ddp_last_error_message());
  ddp_tensor* bad = nullptr;
  int64_t neg[1] = {-2};
  WCHECK(ddp_tensor_from_blob(&bad, x, DDP_FLOAT32, neg, 1) == DDP_E_INVALID_ARGUMENT && !bad, "negative size");
  WCHECK(ddp_tensor_from_blob(&bad, x, static_cast<ddp_dtype>(99), s, 1) == DDP_E_INVALID_ARGUMENT, "bad dtype");
  WCHECK(ddp_tensor_from_blob(&bad, nullptr, DDP_FLOAT32, s, 1) == DDP_E_INVALID_ARGUMENT, "NULL data");
  WCHECK(ddp_all_gather(g, t, nullptr) == DDP_E_INVALID_ARGUMENT, "NULL out");
  ddp_work* w = nullptr;
  WCHECK(ddp_work_wait(nullptr, 0) == DDP_E_INVALID_ARGUMENT, "NULL work");
  // Uneven gather with different ndim on different ranks: every rank refuses.
  float y[6] = {0};
  int64_t s2[2] = {2, 3};
  ddp_tensor* u = nullptr;
  WOK(ddp_tensor_from_blob(&u, y, DDP_FLOAT32, s2, rank == 0 ? 1 : 2));
  std::vector<ddp_tensor*> parts(world, nullptr);
  ddp_status st = ddp_all_gather_uneven(g, u, parts.data());
  if (world > 1) {
    WCHECK(st == DDP_E_INVALID_ARGUMENT, "ndim mismatch -> %s", ddp_status_string(st));
    WCHECK(std::strstr(ddp_last_error_message(), "dimensions") != nullptr, "message: %s", ddp_last_error_message());
  }
  for (auto* p : parts) WCHECK(p == nullptr, "no output on error");
  ddp_tensor_free(u);
  // The group still works.
  WOK(ddp_all_reduce(g, t, DDP_SUM));
  WCHECK(x[0] == world, "sum after errors: %g", x[0]);
  (void)w;
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// The last rank skips one all_reduce; the others must time out within 2x.
void scenario_timeout() {
  int timeout_ms = env_int("DDP_TEST_TIMEOUT_MS", 2000);
  ddp_group* g = join(timeout_ms);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  float x[1024];
  int64_t s[1] = {1024};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, s, 1));
  WOK(ddp_all_reduce(g, t, DDP_SUM));
  if (rank == world - 1) {
    // Stay alive (sockets open) past everyone's timeout, then leave quietly.
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * timeout_ms));
    std::_Exit(g_failures ? 1 : 0);
  }
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  double el = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] all_reduce -> %s after %.2f s: %s\n", rank, ddp_status_string(st), el,
               ddp_last_error_message());
  WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(el < 2.0 * timeout_ms / 1000.0, "took %.2f s for a %d ms timeout", el, timeout_ms);
  WCHECK(ddp_group_is_broken(g) == 1, "group broken after timeout");
  WCHECK(ddp_all_reduce(g, t, DDP_SUM) == DDP_E_STATE, "later calls get DDP_E_STATE");
  ddp_tensor_free(t);
  ddp_group_free(g);  // must not block
}

// All-reduces `t` until a call fails (at most `limit` calls), running
// `before(iteration)` ahead of each; returns the failing status and how long
// that call took, and logs both.
std::pair<ddp_status, double> all_reduce_until_failure(ddp_group* g, ddp_tensor* t, int limit,
                                                       const std::function<void(int)>& before) {
  ddp_status st = DDP_OK;
  double el = 0;
  for (int it = 0; it < limit && st == DDP_OK; ++it) {
    before(it);
    auto t0 = std::chrono::steady_clock::now();
    st = ddp_all_reduce(g, t, DDP_SUM);
    el = seconds_since(t0);
  }
  std::fprintf(stderr, "[rank %d] all_reduce -> %s after %.2f s: %s\n", g_rank, ddp_status_string(st), el,
               ddp_last_error_message());
  return {st, el};
}

// DDP_TEST_VICTIM SIGKILLs itself with an all_reduce in flight; the others
// must get DDP_E_PEER_FAILED within seconds (the group timeout is 120 s).
void scenario_peer_death() {
  ddp_group* g = join(120000);
  int rank = ddp_group_rank(g);
  int victim = env_int("DDP_TEST_VICTIM", 1);
  std::vector<float> x(1 << 20, 1.0f);
  int64_t s[1] = {static_cast<int64_t>(x.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, s, 1));
  auto [st, el] = all_reduce_until_failure(g, t, 1000, [&](int it) {
    if (rank == victim && it == 5) {
      ddp_work* w = nullptr;
      ddp_all_reduce_async(g, t, DDP_SUM, &w);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      raise(SIGKILL);
    }
  });
  WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
  WCHECK(el < 10.0, "detection took %.2f s", el);
  WCHECK(ddp_all_reduce(g, t, DDP_SUM) == DDP_E_STATE, "later calls get DDP_E_STATE");
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// WORLD_SIZE ranks expected, fewer started: the rendezvous says who came.
void scenario_rendezvous_timeout() {
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = env_int("DDP_TEST_TIMEOUT_MS", 2000);
  ddp_group* g = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_group_init(&g, nullptr, &o);
  double el = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] init -> %s after %.2f s: %s\n", g_rank, ddp_status_string(st), el,
               ddp_last_error_message());
  WCHECK(st == DDP_E_TIMEOUT && g == nullptr, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  const char* want = std::getenv("DDP_TEST_EXPECT");
  WCHECK(!want || std::strstr(ddp_last_error_message(), want), "message lacks '%s'", want);
  WCHECK(el < 2.0 * o.timeout_ms / 1000.0 + 1, "took %.2f s", el);
}

// Subgroups: one per node (LOCAL_WORLD_SIZE ranks) and explicit sizes.
void scenario_subgroups() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  int per = env_int("DDP_TEST_GROUP_SIZE", 0);
  int block = per ? per : env_int("LOCAL_WORLD_SIZE", world);
  ddp_group* sub = nullptr;
  WOK(ddp_group_new_subgroups(g, per, &sub));
  WCHECK(ddp_group_size(sub) == block, "subgroup size %d, want %d", ddp_group_size(sub), block);
  WCHECK(ddp_group_rank(sub) == rank % block, "subgroup rank");
  int64_t v = rank;
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, &v, DDP_INT64, nullptr, 0));
  WOK(ddp_all_reduce(sub, t, DDP_SUM));
  int64_t first = (rank / block) * block, want = 0;
  for (int r = first; r < first + block; ++r) want += r;
  WCHECK(v == want, "subgroup sum %lld want %lld", (long long)v, (long long)want);
  v = 1;
  WOK(ddp_all_reduce(g, t, DDP_SUM));  // the parent still works
  WCHECK(v == world, "world sum after subgroup");
  ddp_group* bad = nullptr;
  if (world > 1) WCHECK(ddp_group_new_subgroups(g, world + 1, &bad) == DDP_E_INVALID_ARGUMENT, "size > world");
  ddp_tensor_free(t);
  ddp_group_free(sub);
  ddp_group_free(g);
}

// DDP_TEST_VICTIM SIGSTOPs itself in the middle of a loop of all_reduces;
// the others, with a 5 s timeout, must get DDP_E_TIMEOUT within 10 s. Rank 0
// then SIGKILLs the stopped rank (its pid comes through the group).
void scenario_stall() {
  int timeout_ms = env_int("DDP_TEST_TIMEOUT_MS", 5000);
  ddp_group* g = join(timeout_ms);
  int rank = ddp_group_rank(g);
  int victim = env_int("DDP_TEST_VICTIM", 1);
  int64_t pid = getpid();
  ddp_tensor* pt = nullptr;
  WOK(ddp_tensor_from_blob(&pt, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_broadcast(g, pt, victim));  // everyone learns the victim's pid
  std::vector<float> x(1 << 16, 1.0f);
  int64_t s[1] = {static_cast<int64_t>(x.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, s, 1));
  auto [st, el] = all_reduce_until_failure(g, t, 100000, [&](int it) {
    if (rank == victim && it == 3) raise(SIGSTOP);
  });
  WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(el < 10.0, "took %.2f s", el);
  if (rank == 0) kill(static_cast<pid_t>(pid), SIGKILL);
  ddp_tensor_free(t);
  ddp_tensor_free(pt);
  ddp_group_free(g);
}

// Rank 0 fails right after joining; the others wait in a barrier (10 min timeout).
void scenario_exit_rank0() {
  ddp_group* g = join(600000);
  if (ddp_group_rank(g) == 0) std::_Exit(7);
  ddp_barrier(g);
}

// For --max-restarts: rank 1 dies in the first round only; the second round
// must run normally and see TORCHELASTIC_RESTART_COUNT=1.
void scenario_die_first_round() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  int restart = env_int("TORCHELASTIC_RESTART_COUNT", -1);
  if (restart == 0 && rank == 1) raise(SIGKILL);
  int64_t v = 1;
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, &v, DDP_INT64, nullptr, 0));
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  if (restart == 0) std::_Exit(st == DDP_OK ? 0 : 5);  // the peer died: fail this round
  WOK(st);
  WCHECK(v == world, "sum %lld", (long long)v);
  std::printf("restart_count=%d rank=%d sum=%lld\n", restart, rank, (long long)v);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Sleeps (for the signal tests).
// Rank 1 ends with 0 at once; the others join (with a long timeout) and
// would wait for it: the launcher must end the job instead.
void scenario_quit_before_join() {
  if (g_rank == 1) return;
  ddp_group* g = join(120000);
  ddp_group_free(g);
}

void scenario_sleep() {
  std::printf("sleeping\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(600));
}

// Gradient i, element k of rank r: small integers, so that g * (1/world)
// and the sums over ranks are exact and the average can be checked exactly.
float grad_value(int r, size_t i, size_t k, int step) {
  return static_cast<float>(static_cast<int>((r * 13 + i * 7 + k * 3 + step * 5) % 17) - 8);
}

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

// The comm hook slot with PyTorch's allreduce hook: the same averages.
void scenario_allreduce_hook() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const std::vector<size_t> sizes = {1000, 7, 300000};
  FloatArrays grads(sizes, 0.0f);
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  o.first_bucket_mb = 0.001;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, nullptr, grads.tensors(), sizes.size(), &o));
  ddp_comm_hook* hook = nullptr;
  WOK(ddp_comm_hook_allreduce(&hook));
  WOK(ddp_reducer_set_comm_hook(red, hook));
  ddp_comm_hook_free(hook);  // the reducer keeps its own reference
  for (int step = 0; step < 2; ++step) {
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t k = 0; k < sizes[i]; ++k) grads[i][k] = grad_value(rank, i, k, step);
    for (size_t i = 0; i < sizes.size(); ++i) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t k = 0; k < sizes[i]; k += 97) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += grad_value(r, i, k, step);
        WCHECK(grads[i][k] == static_cast<float>(sum / world), "hook avg %zu[%zu]: %g vs %g", i, k, grads[i][k],
               sum / world);
      }
  }
  WCHECK(ddp_reducer_join(red) == DDP_E_STATE, "join without join_enabled");
  ddp_reducer_free(red);
  ddp_group_free(g);
}

// A comm hook written in C: all-reduce the bucket, then average by hand.
// Checks what the hook is told about the bucket (offsets, shapes).
ddp_status c_hook(ddp_group* g, const ddp_comm_bucket* b, void* user) {
  int* calls = static_cast<int*>(user);
  ++*calls;
  if (std::getenv("DDP_TEST_HOOK_FAILS_ON") && ddp_group_rank(g) == std::atoi(std::getenv("DDP_TEST_HOOK_FAILS_ON")))
    return DDP_E_BACKEND;
  int64_t total = 0;
  for (size_t k = 0; k < b->num_params; ++k) {
    int64_t numel = 1;
    for (size_t d = 0; d < b->ndims[k]; ++d) numel *= b->shapes[k][d];
    if (b->offsets[k] != total) return DDP_E_INTERNAL;
    total += numel;
  }
  if (total != ddp_tensor_numel(b->buffer)) return DDP_E_INTERNAL;
  ddp_status s = ddp_all_reduce(g, b->buffer, DDP_SUM);
  if (s != DDP_OK) return s;
  float* x = static_cast<float*>(ddp_tensor_data(b->buffer));
  for (int64_t i = 0; i < total; ++i) x[i] /= static_cast<float>(b->divisor);
  return DDP_OK;
}

void scenario_custom_hook() {
  ddp_group* g = join(20000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const std::vector<size_t> sizes = {1000, 7, 300000};
  std::vector<std::vector<float>> grads(sizes.size());
  std::vector<ddp_tensor*> gt(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) {
    grads[i].assign(sizes[i], 0.0f);
    int64_t shape[2] = {1, static_cast<int64_t>(sizes[i])};
    WOK(ddp_tensor_from_blob(&gt[i], grads[i].data(), DDP_FLOAT32, shape, 2));
  }
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  o.first_bucket_mb = 0.001;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, nullptr, gt.data(), sizes.size(), &o));
  int calls = 0;
  ddp_comm_hook* hook = nullptr;
  WOK(ddp_comm_hook_custom(&hook, c_hook, &calls));
  WOK(ddp_reducer_set_comm_hook(red, hook));
  ddp_comm_hook_free(hook);
  for (size_t i = 0; i < sizes.size(); ++i)
    for (size_t k = 0; k < sizes[i]; ++k) grads[i][k] = grad_value(rank, i, k, 0);
  for (size_t i = 0; i < sizes.size(); ++i) WOK(ddp_reducer_mark_ready(red, i));
  bool expect_failure = std::getenv("DDP_TEST_HOOK_FAILS_ON") != nullptr;
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_reducer_finish(red);
  if (expect_failure) {
    // Rank 1's hook fails in mark_ready already; every other rank must fail
    // too (within seconds, not at the 20 s timeout).
    std::fprintf(stderr, "[rank %d] finish -> %s after %.2f s: %s\n", rank, ddp_status_string(st), seconds_since(t0),
                 ddp_last_error_message());
  } else {
    WOK(st);
    WCHECK(calls == static_cast<int>(ddp_reducer_bucket_count(red)), "hook calls %d", calls);
    for (size_t i = 0; i < sizes.size(); ++i)
      for (size_t k = 0; k < sizes[i]; k += 31) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += grad_value(r, i, k, 0);
        WCHECK(grads[i][k] == static_cast<float>(sum / world), "custom hook avg");
      }
  }
  ddp_reducer_free(red);
  for (auto* t : gt) ddp_tensor_free(t);
  ddp_group_free(g);
}

// Rank 1's hook fails: every rank gets an error, quickly.
void scenario_custom_hook_error() {
  ddp_group* g = join(20000);
  int rank = ddp_group_rank(g);
  const size_t n = 4;
  FloatArrays grads(std::vector<size_t>(n, 50000), 1.0f);
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  o.first_bucket_mb = 0.1;
  o.bucket_cap_mb = 0.1;
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, nullptr, grads.tensors(), n, &o));
  int calls = 0;
  ddp_comm_hook* hook = nullptr;
  WOK(ddp_comm_hook_custom(&hook, c_hook, &calls));
  WOK(ddp_reducer_set_comm_hook(red, hook));
  ddp_comm_hook_free(hook);
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = DDP_OK;
  for (size_t i = 0; i < n && st == DDP_OK; ++i) st = ddp_reducer_mark_ready(red, i);
  if (st == DDP_OK) st = ddp_reducer_finish(red);
  double el = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] -> %s after %.2f s: %s\n", rank, ddp_status_string(st), el, ddp_last_error_message());
  WCHECK(st != DDP_OK, "rank %d got no error", rank);
  WCHECK(el < 10, "took %.2f s", el);
  ddp_reducer_free(red);
  ddp_group_free(g);
}

// Post-local SGD (start at step 3, one subgroup per node of 2 ranks) with a
// periodic model averager (period 4, warmup 3): after each averaging step
// the parameters are identical on all ranks; between them they are equal
// within a node and differ across nodes.
void scenario_post_localsgd() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const int per_node = env_int("LOCAL_WORLD_SIZE", 2);
  const std::vector<size_t> sizes = {1000, 50};
  const size_t n = sizes.size();
  FloatArrays params(sizes, 1.0f), grads(sizes, 0.0f);
  ddp_reducer* red = nullptr;
  WOK(ddp_reducer_new(&red, g, params.tensors(), grads.tensors(), n, nullptr));
  ddp_comm_hook* hook = nullptr;
  WOK(ddp_comm_hook_post_localsgd(&hook, nullptr, 3, 1));
  WOK(ddp_reducer_set_comm_hook(red, hook));
  ddp_comm_hook_free(hook);
  ddp_model_averager* avg = nullptr;
  WCHECK(ddp_model_averager_new(&avg, g, 0, 0) == DDP_E_INVALID_ARGUMENT, "period 0 is refused");
  WOK(ddp_model_averager_new(&avg, g, 4, 3));
  for (int step = 0; step < 12; ++step) {
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k) grads[i][k] = grad_value(rank, i, k, step);
    for (size_t i = 0; i < n; ++i) WOK(ddp_reducer_mark_ready(red, i));
    WOK(ddp_reducer_finish(red));
    for (size_t i = 0; i < n; ++i)
      for (size_t k = 0; k < sizes[i]; ++k) params[i][k] -= 0.125f * grads[i][k];
    WOK(ddp_model_averager_step(avg, params.tensors(), n));
    // Everyone's first parameter, side by side.
    ddp_tensor* all = nullptr;
    WOK(ddp_all_gather(g, params.tensor(0), &all));
    const float* rows = static_cast<const float*>(ddp_tensor_data(all));
    auto same = [&](int a, int b) {
      return std::memcmp(rows + a * sizes[0], rows + b * sizes[0], sizes[0] * sizeof(float)) == 0;
    };
    bool averaged = step < 3 || (step >= 3 && (step - 3) % 4 == 0);
    for (int r = 0; r < world; ++r) {
      bool same_node = r / per_node == rank / per_node;
      if (averaged || same_node) WCHECK(same(r, rank), "step %d: rank %d differs from rank %d", step, r, rank);
      else WCHECK(!same(r, rank), "step %d: rank %d (other node) equals rank %d between averagings", step, r, rank);
    }
    ddp_tensor_free(all);
  }
  ddp_model_averager_free(avg);
  ddp_reducer_free(red);
  ddp_group_free(g);
}

// PowerSGD, per tensor and batched, with error feedback and warm start
// (start step 2): every rank ends each step with the same gradients; with
// the per-tensor hook, a rank-1 weight ((rank + 1) u v^T on each rank) comes
// back as its exact average and the bias (a vector) is averaged as it is;
// the statistics count what was sent.
void scenario_powersgd() {
  ddp_group* g = join(60000);
  int rank = ddp_group_rank(g), world = ddp_group_size(g);
  const int64_t rows = 32, cols = 16;
  std::vector<float> w(rows * cols), b(cols);
  int64_t sw[2] = {rows, cols}, sb[1] = {cols};
  ddp_tensor* grads[2] = {nullptr, nullptr};
  WOK(ddp_tensor_from_blob(&grads[0], w.data(), DDP_FLOAT32, sw, 2));
  WOK(ddp_tensor_from_blob(&grads[1], b.data(), DDP_FLOAT32, sb, 1));
  const float mean_scale = (world + 1) / 2.0f;  // the average of rank + 1
  for (int batched = 0; batched < 2; ++batched) {
    ddp_reducer_options ro = DDP_REDUCER_OPTIONS_INIT;
    ro.broadcast_parameters = 0;
    ddp_reducer* red = nullptr;
    WOK(ddp_reducer_new(&red, g, nullptr, grads, 2, &ro));
    ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
    o.start_powersgd_iter = 2;
    o.batched = batched;
    ddp_comm_hook* hook = nullptr;
    WOK(ddp_comm_hook_powersgd(&hook, &o));
    WOK(ddp_reducer_set_comm_hook(red, hook));
    for (int step = 0; step < 4; ++step) {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j)
          w[i * cols + j] = (rank + 1) * std::sin(0.3f * (i + 1) + step) * std::cos(0.2f * j - step);
      for (int64_t j = 0; j < cols; ++j) b[j] = static_cast<float>(rank + j);
      WOK(ddp_reducer_mark_ready(red, 1));
      WOK(ddp_reducer_mark_ready(red, 0));
      WOK(ddp_reducer_finish(red));
      for (ddp_tensor* t : grads) {  // the same on every rank
        ddp_tensor* all = nullptr;
        WOK(ddp_all_gather(g, t, &all));
        size_t bytes = ddp_tensor_nbytes(t);
        const char* rows_all = static_cast<const char*>(ddp_tensor_data(all));
        for (int r = 0; r < world; ++r)
          WCHECK(std::memcmp(rows_all + r * bytes, ddp_tensor_data(t), bytes) == 0,
                 "batched=%d step %d: rank %d's gradients differ from rank %d's", batched, step, r, rank);
        ddp_tensor_free(all);
      }
      if (batched) continue;
      for (int64_t j = 0; j < cols; ++j)
        WCHECK(std::fabs(b[j] - ((world - 1) / 2.0f + j)) <= 1e-5f * (1 + j), "step %d: bias %lld is %g", step,
               (long long)j, b[j]);  // x / world then SUM: float rounding
      float worst = 0;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          float want = mean_scale * std::sin(0.3f * (i + 1) + step) * std::cos(0.2f * j - step);
          worst = std::max(worst, std::fabs(w[i * cols + j] - want));
        }
      WCHECK(worst < 1e-4f * mean_scale, "step %d: rank-1 average off by %g", step, worst);
    }
    ddp_compression_stats st;
    WOK(ddp_comm_hook_compression_stats(hook, &st));
    const uint64_t numel = rows * cols + cols;
    const uint64_t side = 23;  // ceil(sqrt(32 * 16 + 16))
    WCHECK(st.iteration == 4, "iteration %lld", (long long)st.iteration);
    WCHECK(st.numel_before == 2 * numel, "numel_before %llu", (unsigned long long)st.numel_before);
    uint64_t after = batched ? 2 * side * 2 : 2 * ((rows + cols) + cols);
    WCHECK(st.numel_after == after, "numel_after %llu, want %llu", (unsigned long long)st.numel_after,
           (unsigned long long)after);
    ddp_comm_hook_free(hook);
    ddp_reducer_free(red);
  }
  ddp_tensor_free(grads[0]);
  ddp_tensor_free(grads[1]);
  ddp_group_free(g);
}

}  // namespace

int main(int argc, char** argv) {
  g_rank = env_int("RANK", -1);
  // Under ddprun a failure makes the launcher SIGTERM the others; tests that
  // check what the survivors saw let them finish on their own instead.
  if (std::getenv("DDP_TEST_IGNORE_SIGTERM")) signal(SIGTERM, SIG_IGN);
  if (argc < 2) {
    std::fprintf(stderr, "usage: mp_worker <scenario>\n");
    return 2;
  }
  std::map<std::string, std::function<void()>> scenarios = {
      {"collectives", scenario_collectives},
      {"invalid", scenario_invalid},
      {"timeout", scenario_timeout},
      {"peer_death", scenario_peer_death},
      {"rendezvous_timeout", scenario_rendezvous_timeout},
      {"subgroups", scenario_subgroups},
      {"stall", scenario_stall},
      {"exit_rank0", scenario_exit_rank0},
      {"die_first_round", scenario_die_first_round},
      {"sleep", scenario_sleep},
      {"quit_before_join", scenario_quit_before_join},
      {"reducer", scenario_reducer},
      {"join", scenario_join},
      {"allreduce_hook", scenario_allreduce_hook},
      {"custom_hook", scenario_custom_hook},
      {"custom_hook_error", scenario_custom_hook_error},
      {"post_localsgd", scenario_post_localsgd},
      {"powersgd", scenario_powersgd},
  };
  auto it = scenarios.find(argv[1]);
  if (it == scenarios.end()) {
    std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
  }
  it->second();
  if (g_failures) std::fprintf(stderr, "[rank %d] %d check(s) failed\n", g_rank, g_failures);
  return g_failures ? 1 : 0;
}
