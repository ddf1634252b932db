// mp_worker scenarios: Collectives on real ranks: every op x every dtype, bad arguments, subgroups.
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include "worker_util.h"
#include "worker_scenarios.h"

using namespace worker;

namespace {

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
  // A src that cannot send (a len past 2^63 - 1) fails on every rank at
  // once, each saying so, where its peers waited out the 60 s timeout; and
  // the group stays usable.
  {
    const int src = world - 1;
    uint8_t one = 1;
    ddp_buffer* out = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    const ddp_status st = ddp_broadcast_bytes(g, &one, rank == src ? SIZE_MAX : 1, src, &out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string why = ddp_last_error_message();
    WCHECK(st == DDP_E_INVALID_ARGUMENT, "unsendable broadcast_bytes -> %s: %s", ddp_status_string(st), why.c_str());
    WCHECK(why.find(rank == src ? "exceeds the largest payload" : "could not send its bytes") != std::string::npos,
           "unsendable broadcast_bytes said: %s", why.c_str());
    WCHECK(s < 10, "unsendable broadcast_bytes took %.1f s", s);
    WCHECK(out == nullptr, "unsendable broadcast_bytes gave a buffer");
    WOK(ddp_broadcast_bytes(g, &one, 1, src, &out));
    WCHECK(ddp_buffer_size(out) == 1 && *static_cast<const uint8_t*>(ddp_buffer_data(out)) == 1, "after it");
    ddp_buffer_free(out);
  }
  // A peer with no memory for what src sends (its address space capped
  // below the payload) fails every rank at once, each naming it, where src
  // and the others waited out the 60 s timeout in the payload's broadcast;
  // the group stays usable. Not under the sanitizers, whose shadow memory
  // an address-space cap would refuse.
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  if (world > 1) {
    const int src = world - 1, starved = 0;
    const size_t len = size_t(512) << 20;
    std::vector<uint8_t> data(rank == src ? len : 0, 7);
    rlimit before{};
    getrlimit(RLIMIT_AS, &before);
    if (rank == starved) {
      size_t pages = 0;
      std::ifstream("/proc/self/statm") >> pages;
      rlimit capped = before;
      capped.rlim_cur = pages * size_t(sysconf(_SC_PAGESIZE)) + (size_t(128) << 20);
      WCHECK(setrlimit(RLIMIT_AS, &capped) == 0, "capping the address space: %s", std::strerror(errno));
    }
    ddp_buffer* out = nullptr;
    const auto t0 = std::chrono::steady_clock::now();
    const ddp_status st = ddp_broadcast_bytes(g, data.data(), rank == src ? len : 0, src, &out);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string why = ddp_last_error_message();
    if (rank == starved) setrlimit(RLIMIT_AS, &before);
    WCHECK(st == DDP_E_NOMEM, "broadcast_bytes to a starved peer -> %s: %s", ddp_status_string(st), why.c_str());
    WCHECK(why.find(rank == starved ? "no memory for the 536870912 bytes src rank" : "rank 0 has no memory") !=
               std::string::npos,
           "broadcast_bytes to a starved peer said: %s", why.c_str());
    WCHECK(s < 10, "broadcast_bytes to a starved peer took %.1f s", s);
    WCHECK(out == nullptr, "broadcast_bytes to a starved peer gave a buffer");
    uint8_t one = 1;
    WOK(ddp_broadcast_bytes(g, &one, 1, src, &out));
    WCHECK(ddp_buffer_size(out) == 1 && *static_cast<const uint8_t*>(ddp_buffer_data(out)) == 1, "after it");
    ddp_buffer_free(out);
  }
#endif
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
  // The last rank's tensor has more dimensions than a gather takes (17 of
  // size 1): every rank refuses, naming it. Refused on that rank alone, it
  // left the others in the gather, taking that rank's next call for it.
  int64_t ones[17];
  std::fill(ones, ones + 17, int64_t{1});
  WOK(ddp_tensor_from_blob(&u, y, DDP_FLOAT32, ones, rank == world - 1 ? 17 : 1));
  st = ddp_all_gather_uneven(g, u, parts.data());
  WCHECK(st == DDP_E_INVALID_ARGUMENT, "17 dimensions -> %s", ddp_status_string(st));
  WCHECK(std::strstr(ddp_last_error_message(),
                     ("rank " + std::to_string(world - 1) + "'s tensor has 17 dimensions").c_str()) != nullptr,
         "message: %s", ddp_last_error_message());
  for (auto* p : parts) WCHECK(p == nullptr, "no output on error");
  ddp_tensor_free(u);
  // The group still works.
  WOK(ddp_all_reduce(g, t, DDP_SUM));
  WCHECK(x[0] == world, "sum after errors: %g", x[0]);
  (void)w;
  ddp_tensor_free(t);
  ddp_group_free(g);
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

}  // namespace

WORKER_SCENARIO("collectives", scenario_collectives);
WORKER_SCENARIO("invalid", scenario_invalid);
WORKER_SCENARIO("subgroups", scenario_subgroups);
