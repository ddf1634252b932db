// hardening_worker scenarios: the fault-injection cases of issue 10 that
// need real ranks (a stopped store host, a resumed rank, rejoining after a
// breakage, reducer layouts, DETAIL mode, mismatched sizes).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "worker_scenarios.h"


using namespace worker;

namespace {

// Everyone learns `victim`'s pid.
pid_t pid_of(ddp_group* g, int victim) {
  int64_t pid = getpid();
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_broadcast(g, t, victim));
  ddp_tensor_free(t);
  return static_cast<pid_t>(pid);
}

// All-reduces `x` until a call fails; `before(it)` runs ahead of each call.
std::pair<ddp_status, double> all_reduce_until_failure(ddp_group* g, std::vector<float>& x,
                                                       const std::function<void(int)>& before) {
  int64_t s[1] = {static_cast<int64_t>(x.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, s, 1));
  auto result = worker::all_reduce_until_failure(g, t, 100000, before);
  ddp_tensor_free(t);
  return result;
}

// Rank 0 hosts the store and stops itself (SIGSTOP) mid-loop. Rank 1 must
// get DDP_E_TIMEOUT within its 5 s timeout plus a little: no wait of it may
// block on the stopped store host. Rank 1 then kills rank 0. With
// `set_after_join`, the group joins with 30 s and is set to 5 s afterwards,
// and the failure must still come in 5 s (it used to come 2 s late,
// waiting on the monitor's stalled read, when the store connections kept
// the 30 s).
void stopped_store_host(bool set_after_join) {
  ddp_group* g = set_after_join ? join_then_set_timeout(5000) : join(5000);
  int rank = ddp_group_rank(g);
  pid_t host = pid_of(g, 0);
  std::vector<float> x(1 << 12, 1.0f);
  auto [st, el] = all_reduce_until_failure(g, x, [&](int it) {
    if (rank == 0 && it == 3) raise(SIGSTOP);
  });
  WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(el < 6.5, "took %.2f s with a 5 s timeout", el);
  kill(host, SIGKILL);
  ddp_group_free(g);
}
void scenario_stopped_store_host() { stopped_store_host(false); }

// The threads of this process called `name` (/proc/self/task/*/comm).
int threads_named(const std::string& name) {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/task")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream comm(std::string("/proc/self/task/") + e->d_name + "/comm");
      std::string got;
      std::getline(comm, got);
      n += got == name;
    }
    closedir(dir);
  }
  return n;
}

// As above, but rank 1 frees its group while rank 0, the store host, is
// still stopped: the free ends within 1.5 s and leaves no store watcher
// thread behind. One left in a read from the stopped host (bounded by the
// group's timeout) could wake in the middle of this process's exit once
// rank 0 is killed.
void scenario_free_while_the_store_host_is_stopped() {
  ddp_group* g = join_then_set_timeout(3000);
  int rank = ddp_group_rank(g);
  pid_t host = pid_of(g, 0);
  WCHECK(threads_named("ddp-store-watch") == 1, "%d store watchers in a group's process", threads_named("ddp-store-watch"));
  std::vector<float> x(1 << 12, 1.0f);
  auto [st, el] = all_reduce_until_failure(g, x, [&](int it) {
    if (rank == 0 && it == 3) raise(SIGSTOP);
  });
  WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  auto t0 = std::chrono::steady_clock::now();
  ddp_group_free(g);
  const double took = seconds_since(t0);
  const int left = threads_named("ddp-store-watch");
  std::fprintf(stderr, "[rank %d] free took %.2f s, %d store watcher(s) left\n", rank, took, left);
  WCHECK(took < 1.5, "the free took %.2f s", took);
  WCHECK(left == 0, "%d store watcher thread(s) left after the free", left);
  kill(host, SIGKILL);
}
void scenario_stopped_store_host_timeout_set_after_join() { stopped_store_host(true); }

// Rank 0, the store host, stops itself once both ranks joined (with 30 s,
// then set to 2 s); rank 1 then makes a subgroup. Its store calls go
// through a connection of its own, bounded by the 2 s set since: DDP_E_TIMEOUT
// within about that, where the connection the group joined on would have
// held it for the 30 s.
void scenario_subgroup_while_the_store_host_is_stopped() {
  ddp_group* g = join_then_set_timeout(2000);
  int rank = ddp_group_rank(g);
  pid_t host = pid_of(g, 0);
  WOK(ddp_barrier(g));
  if (rank == 0) raise(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ddp_group* sub = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_group_new_subgroups(g, 1, &sub);
  const double el = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] new_subgroups: %s after %.2f s (%s)\n", rank, ddp_status_string(st), el,
               ddp_last_error_message());
  WCHECK(st == DDP_E_TIMEOUT && sub == nullptr, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(el < 4.5, "took %.2f s with a 2 s timeout", el);
  kill(host, SIGKILL);
  ddp_group_free(g);
}

// Rank 1 stops itself; ranks 0 and 2 time out (the root cause, published).
// Rank 0 (the store host) then resumes it and stays up a while: on resuming,
// rank 1 must report that same DDP_E_TIMEOUT, not the broken connection it
// finds.
void scenario_resumed_rank_reports_the_root_cause() {
  ddp_group* g = join_then_set_timeout(3000);
  int rank = ddp_group_rank(g);
  pid_t victim = pid_of(g, 1);
  std::vector<float> x(1 << 12, 1.0f);
  auto [st, el] = all_reduce_until_failure(g, x, [&](int it) {
    if (rank == 1 && it == 3) raise(SIGSTOP);
  });
  WCHECK(st == DDP_E_TIMEOUT, "expected the root cause DDP_E_TIMEOUT, got %s: %s", ddp_status_string(st),
         ddp_last_error_message());
  if (rank == 0) {
    kill(victim, SIGCONT);
    std::this_thread::sleep_for(std::chrono::seconds(4));
  }
  ddp_group_free(g);
}

// When a collective's wait fails, the backend no longer touches the
// caller's memory: a caller may free it, or use it again, at once. Rank 1
// stops itself in the middle of a 64 MiB all-reduce (once its own buffer, one
// libddp owns, shows rank 0's data arriving); rank 0, whose buffer is a view
// of its own memory, gives up waiting after 1 s (the group's timeout, and
// Gloo's own for each step, is 20 s), writes a sentinel over its buffer and
// resumes rank 1, whose backend goes on with the collective. Rank 0's buffer
// must keep the sentinel. (Against the library before its copies, Gloo
// wrote 16.25 M of the 16.78 M floats after the wait had returned. On shm
// the old library passed too: its collective there ends at its next wait.)
void scenario_caller_memory_after_a_failed_wait() {
  ddp_group* g = join_then_set_timeout(20000);
  const int rank = ddp_group_rank(g);
  const pid_t stopped = pid_of(g, 1);
  constexpr int64_t n = int64_t{16} << 20;
  if (rank == 1) {
    ddp_tensor* t = nullptr;
    const ddp_device cpu = DDP_DEVICE_CPU_INIT;
    WOK(ddp_tensor_new(&t, DDP_FLOAT32, &n, 1, cpu));
    auto* x = static_cast<volatile float*>(ddp_tensor_data(t));
    for (int64_t i = 0; i < n; ++i) x[i] = 2.0f;
    std::thread watch([x] {
      for (;;)
        for (int64_t i = 0; i < n; i += 4096)
          if (x[i] != 2.0f) {
            raise(SIGSTOP);
            return;
          }
    });
    // Either rank 0's failure reaches it first, or the collective, which
    // rank 0's backend finished without it, completes.
    const ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
    std::printf("rank 1's all-reduce: %s %s\n", ddp_status_string(st), st ? ddp_last_error_message() : "");
    watch.join();
    ddp_tensor_free(t);
  } else {
    std::vector<float> mine(static_cast<size_t>(n), 1.0f);
    ddp_tensor* t = nullptr;
    WOK(ddp_tensor_from_blob(&t, mine.data(), DDP_FLOAT32, &n, 1));
    ddp_work* w = nullptr;
    WOK(ddp_all_reduce_async(g, t, DDP_SUM, &w));
    const ddp_status st = ddp_work_wait(w, 1000);
    WCHECK(st == DDP_E_TIMEOUT, "expected DDP_E_TIMEOUT, got %s: %s", ddp_status_string(st), ddp_last_error_message());
    ddp_work_free(w);
    ddp_tensor_free(t);
    std::fill(mine.begin(), mine.end(), -1.0f);  // the caller's memory, in use for something else
    kill(stopped, SIGCONT);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto kept = std::count(mine.begin(), mine.end(), -1.0f);
    WCHECK(kept == n, "%lld of %lld floats of the caller's memory were written after its wait had returned",
           static_cast<long long>(n - kept), static_cast<long long>(n));
  }
  ddp_group_free(g);
}

// Waits until process `pid` is stopped (state T in /proc/PID/stat), or
// with `or_dead` also until it is dead (state Z, or gone).
void wait_until_stopped(pid_t pid, bool or_dead = false) {
  for (int i = 0; i < 1000; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    if (line.empty() && or_dead) return;
    const size_t paren = line.rfind(')');
    const char state = paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
    if (state == 'T' || (or_dead && state == 'Z')) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  WCHECK(false, "process %d did not stop", static_cast<int>(pid));
}

// A work on caller memory freed unwaited while a peer is stopped: the
// memory is not touched after the free returns. Rank 0 starts a 64 MiB
// all-reduce on a view of its memory (group timeout 3 s); rank 1 stops
// itself, either before its own call or (DDP_TEST_STOP_INSIDE=1) inside
// it, once its buffer (one libddp owns) shows rank 0's data arriving. Rank
// 0 then frees its work unwaited, writes a sentinel over its memory and
// resumes rank 1. Gloo works on libddp's copy: the free returns at once,
// and a resumed rank 1 still sends into the copy. shm performs the call in
// place on its worker thread (DDP_SHM_INLINE=0): the free waits for it and
// breaks the group after the timeout; DDP_TEST_KILL_PEER=1: rank 1 is
// killed instead (group timeout 20 s), which ends shm's collective, and so
// the free's wait, at once. DDP_TEST_BOOL=1: a bool tensor,
// which shm hands to Gloo, so on a copy there too. (Without the free's
// wait, rank 1's resumed call completed the shm collective into rank 0's
// memory; with every call in place, Gloo wrote into it.)
void scenario_caller_memory_of_a_freed_work() {
  const bool killed = env_int("DDP_TEST_KILL_PEER", 0) == 1;
  const int timeout_ms = killed ? 20000 : 3000;
  ddp_group* g = join_then_set_timeout(timeout_ms);
  const int rank = ddp_group_rank(g);
  const pid_t stopped = pid_of(g, 1);
  const bool bools = env_int("DDP_TEST_BOOL", 0) == 1, inside = env_int("DDP_TEST_STOP_INSIDE", 0) == 1;
  const ddp_dtype dtype = bools ? DDP_BOOL : DDP_FLOAT32;
  // 64 MiB: 16 M floats, or 64 M bools.
  constexpr size_t bytes = size_t{64} << 20;
  const int64_t n = static_cast<int64_t>(bools ? bytes : bytes / 4);
  if (bools) {
    // shm connects the Gloo it hands such calls to on their first use,
    // with every rank: before rank 1 stops.
    bool one = true;
    ddp_tensor* b = nullptr;
    WOK(ddp_tensor_from_blob(&b, &one, DDP_BOOL, nullptr, 0));
    WOK(ddp_all_reduce(g, b, DDP_SUM));
    ddp_tensor_free(b);
  }
  if (rank == 1) {
    // Rank 0's values differ from these zeros: the watch sees them arrive
    // (in a float's high byte: 1.0f's low one is 0).
    ddp_tensor* t = nullptr;
    const ddp_device cpu = DDP_DEVICE_CPU_INIT;
    WOK(ddp_tensor_new(&t, dtype, &n, 1, cpu));
    auto* x = static_cast<volatile uint8_t*>(ddp_tensor_data(t));
    std::thread watch;
    if (inside)
      watch = std::thread([x, killed] {
        for (;;)
          for (size_t i = 3; i < bytes; i += 4096)
            if (x[i] != 0) {
              raise(killed ? SIGKILL : SIGSTOP);
              return;
            }
      });
    else
      raise(killed ? SIGKILL : SIGSTOP);
    const ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
    std::printf("rank 1's all-reduce: %s %s\n", ddp_status_string(st), st ? ddp_last_error_message() : "");
    if (watch.joinable()) watch.join();
    ddp_tensor_free(t);
  } else {
    std::vector<uint8_t> mine(bytes);
    if (bools) std::fill(mine.begin(), mine.end(), uint8_t{1});
    else std::fill_n(reinterpret_cast<float*>(mine.data()), n, 1.0f);
    ddp_tensor* t = nullptr;
    WOK(ddp_tensor_from_blob(&t, mine.data(), dtype, &n, 1));
    ddp_work* w = nullptr;
    WOK(ddp_all_reduce_async(g, t, DDP_SUM, &w));
    wait_until_stopped(stopped, killed);
    const auto t0 = std::chrono::steady_clock::now();
    ddp_work_free(w);
    const double took = seconds_since(t0);
    std::printf("rank 0's free took %.2f s\n", took);
    WCHECK(took < (killed ? 5.0 : 8.0), "the free took %.1f s; the group's timeout is %d ms", took, timeout_ms);
    // Where the backend works on a copy, the free has nothing to wait for.
    if (env_int("DDP_TEST_FREE_AT_ONCE", 0) == 1) WCHECK(took < 1.0, "the free of a copied call took %.2f s", took);
    ddp_tensor_free(t);
    std::fill(mine.begin(), mine.end(), uint8_t{0xA5});  // the caller's memory, in use for something else
    if (!killed) kill(stopped, SIGCONT);
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const auto kept = std::count(mine.begin(), mine.end(), uint8_t{0xA5});
    WCHECK(static_cast<size_t>(kept) == bytes,
           "%lld of %zu bytes of the caller's memory were written after its work was freed",
           static_cast<long long>(bytes - static_cast<size_t>(kept)), bytes);
  }
  ddp_group_free(g);
}

// A group broken by a timeout (rank 1 skips an all_reduce) is freed and a
// new one joined on the same MASTER_PORT, three times; each new group works.
void scenario_rejoin_after_breakage() {
  for (int cycle = 0; cycle < 3; ++cycle) {
    // Rank 0 rejoins as soon as its all_reduce has timed out, rank 1 a
    // second later: the rendezvous gets 30 s, the collectives 1.5 s.
    ddp_group* g = join_then_set_timeout(1500);
    int rank = ddp_group_rank(g);
    float v = 1;
    ddp_tensor* t = nullptr;
    WOK(ddp_tensor_from_blob(&t, &v, DDP_FLOAT32, nullptr, 0));
    WOK(ddp_all_reduce(g, t, DDP_SUM));
    WCHECK(v == 2.0f, "cycle %d: sum %g", cycle, v);
    ddp_status st = rank == 0 ? ddp_all_reduce(g, t, DDP_SUM) : DDP_OK;
    if (rank == 0) WCHECK(st == DDP_E_TIMEOUT, "cycle %d: %s", cycle, ddp_status_string(st));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2500));
    // Rank 1 learns of the breakage through the store.
    if (rank == 1) WCHECK(ddp_barrier(g) != DDP_OK, "cycle %d: rank 1's barrier on a broken group", cycle);
    // A reducer step on the broken group: a status, not a crash.
    std::vector<float> grad(4, 1.0f);
    int64_t n[1] = {4};
    ddp_tensor* gt = nullptr;
    WOK(ddp_tensor_from_blob(&gt, grad.data(), DDP_FLOAT32, n, 1));
    ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
    o.broadcast_parameters = 0;
    ddp_reducer* r = nullptr;
    WCHECK(ddp_reducer_new(&r, g, nullptr, &gt, 1, &o) == DDP_E_STATE, "cycle %d: reducer on a broken group: %s",
           cycle, ddp_last_error_message());
    ddp_tensor_free(gt);
    ddp_tensor_free(t);
    ddp_group_free(g);
  }
}

// Ranks pass different gradient layouts: every rank gets
// DDP_E_INVALID_ARGUMENT naming the other's layout, at construction.
void scenario_reducer_layouts_differ() {
  ddp_group* g = join(20000);
  int rank = ddp_group_rank(g);
  std::vector<float> a(8, 1.0f), b(8, 1.0f);
  int64_t n0[1] = {8}, n1[1] = {rank == 0 ? 8 : 4};
  ddp_tensor* grads[2] = {nullptr, nullptr};
  WOK(ddp_tensor_from_blob(&grads[0], a.data(), DDP_FLOAT32, n0, 1));
  WOK(ddp_tensor_from_blob(&grads[1], b.data(), DDP_FLOAT32, n1, 1));
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  ddp_reducer* r = nullptr;
  ddp_status st = ddp_reducer_new(&r, g, nullptr, grads, 2, &o);
  WCHECK(st == DDP_E_INVALID_ARGUMENT, "got %s", ddp_status_string(st));
  WCHECK(std::strstr(ddp_last_error_message(), "layouts differ") != nullptr, "message: %s", ddp_last_error_message());
  WOK(ddp_barrier(g));  // the group is still usable
  ddp_tensor_free(grads[0]);
  ddp_tensor_free(grads[1]);
  ddp_group_free(g);
}

// Rank 0 launches a bucket (its only gradient is ready) and frees the
// reducer at once, while rank 1 joins that all-reduce only a second later:
// the free must wait for the bucket (the header promises it), and the next
// collective must pair up correctly on both ranks. Over Gloo: the shm
// backend finishes a bucket before mark_ready returns, so nothing would be
// in flight.
void scenario_free_reducer_with_bucket_in_flight() {
  ddp_group* g = join(20000, "gloo");
  int rank = ddp_group_rank(g);
  std::vector<float> grad(1024, static_cast<float>(rank + 1));
  int64_t n[1] = {1024};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, grad.data(), DDP_FLOAT32, n, 1));
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  ddp_reducer* r = nullptr;
  WOK(ddp_reducer_new(&r, g, nullptr, &t, 1, &o));
  if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  WOK(ddp_reducer_mark_ready(r, 0));  // launches the bucket's all-reduce
  auto t0 = std::chrono::steady_clock::now();
  ddp_reducer_free(r);
  double freed_in = seconds_since(t0);
  if (rank == 0) WCHECK(freed_in > 0.5, "ddp_reducer_free returned after %.3f s, before the bucket in flight", freed_in);
  float mine = static_cast<float>(10 * (rank + 1)), sum = 0;
  ddp_tensor* x = nullptr;
  WOK(ddp_tensor_from_blob(&x, &mine, DDP_FLOAT32, nullptr, 0));
  WOK(ddp_all_reduce(g, x, DDP_SUM));
  sum = mine;
  WCHECK(sum == 30.0f, "the collective after the free got %g, expected 30", sum);
  ddp_tensor_free(x);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// DDP_DEBUG=DETAIL: mismatched calls give DDP_E_INVALID_ARGUMENT on every
// rank, naming the other rank's call, and leave the group usable.
void scenario_detail_mismatches() {
  ddp_group* g = join(20000);
  int rank = ddp_group_rank(g);
  WCHECK(ddp_group_debug_detail(g) == 1, "DDP_DEBUG=DETAIL was not picked up");
  std::vector<float> f(8, 1.0f);
  std::vector<int32_t> i32(8, 1);
  int64_t four[1] = {4}, eight[1] = {8};
  ddp_tensor *small = nullptr, *big = nullptr, *ints = nullptr;
  WOK(ddp_tensor_from_blob(&small, f.data(), DDP_FLOAT32, four, 1));
  WOK(ddp_tensor_from_blob(&big, f.data(), DDP_FLOAT32, eight, 1));
  WOK(ddp_tensor_from_blob(&ints, i32.data(), DDP_INT32, eight, 1));
  auto expect_refused = [&](ddp_status st, const char* what, const char* mention) {
    WCHECK(st == DDP_E_INVALID_ARGUMENT, "%s: got %s: %s", what, ddp_status_string(st), ddp_last_error_message());
    WCHECK(std::strstr(ddp_last_error_message(), mention) != nullptr, "%s: message lacks '%s': %s", what, mention,
           ddp_last_error_message());
  };
  expect_refused(ddp_all_reduce(g, rank == 0 ? small : big, DDP_SUM), "sizes", "rank 1: all_reduce(sum) Float[8]");
  expect_refused(ddp_all_reduce(g, rank == 0 ? big : ints, DDP_SUM), "dtypes", "Int[8]");
  expect_refused(ddp_all_reduce(g, big, rank == 0 ? DDP_SUM : DDP_MAX), "ops", "all_reduce(max)");
  expect_refused(ddp_broadcast(g, big, rank), "roots", "root 1");
  expect_refused(rank == 0 ? ddp_all_reduce(g, big, DDP_SUM) : ddp_broadcast(g, big, 0), "kinds", "broadcast");
  // Still usable, and uneven gathers (sizes may differ) pass the check.
  WOK(ddp_all_reduce(g, big, DDP_SUM));
  WCHECK(f[0] == 2.0f, "sum after the refusals: %g", f[0]);
  ddp_tensor* out[2] = {nullptr, nullptr};
  WOK(ddp_all_gather_uneven(g, rank == 0 ? small : big, out));
  WCHECK(ddp_tensor_numel(out[0]) == 4 && ddp_tensor_numel(out[1]) == 8, "uneven sizes");
  ddp_tensor_free(out[0]);
  ddp_tensor_free(out[1]);
  // Cost per call of the check: 4-byte all_reduces with it off and on.
  ddp_tensor* one = nullptr;
  WOK(ddp_tensor_from_blob(&one, f.data(), DDP_FLOAT32, nullptr, 0));
  double secs[2] = {0, 0};
  const int calls = 300;
  for (int round = 0; round < 4; ++round) {
    int on = round % 2;
    WOK(ddp_group_set_debug_detail(g, on));
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < calls; ++k) WOK(ddp_all_reduce(g, one, DDP_SUM));
    secs[on] += seconds_since(t0);
  }
  if (rank == 0)
    std::printf("DETAIL cost: 4-byte all_reduce %.1f us without the check, %.1f us with it (%.2fx)\n",
                secs[0] / (2 * calls) * 1e6, secs[1] / (2 * calls) * 1e6, secs[1] / secs[0]);
  ddp_tensor_free(one);
  ddp_tensor_free(small);
  ddp_tensor_free(big);
  ddp_tensor_free(ints);
  ddp_group_free(g);
}

// Without DETAIL: all_reduce with different element counts must not abort
// any process; every rank gets a status within its timeout.
void scenario_size_mismatch_without_detail() {
  ddp_group* g = join_then_set_timeout(3000);
  int rank = ddp_group_rank(g);
  std::vector<float> f(1 << 16, 1.0f);
  int64_t n[1] = {rank == 0 ? 1024 : 1 << 16};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, f.data(), DDP_FLOAT32, n, 1));
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  std::fprintf(stderr, "[rank %d] mismatched all_reduce -> %s after %.2f s: %s\n", rank, ddp_status_string(st),
               seconds_since(t0), ddp_last_error_message());
  WCHECK(st != DDP_OK, "a mismatched all_reduce returned OK");
  WCHECK(seconds_since(t0) < 8.0, "took %.2f s with a 3 s timeout", seconds_since(t0));
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Options for `backend` with a 30 s timeout; on rank 1, Gloo is told to use
// an interface that does not exist.
ddp_group_options rank_one_without_interface(int rank, const char* backend) {
  if (rank == 1) setenv("GLOO_SOCKET_IFNAME", "nosuchif0", 1);
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = 30000;
  o.backend = backend;
  return o;
}

// `call` failed on every rank with rank 1's reason ("nosuchif0", its
// GLOO_SOCKET_IFNAME), rank 0's naming rank 1, within 10 s of a 30 s timeout.
void expect_rank_ones_failure(const char* call, int rank, ddp_status st, double seconds) {
  std::string msg = ddp_last_error_message();
  std::fprintf(stderr, "[rank %d] %s -> %s after %.2f s: %s\n", rank, call, ddp_status_string(st), seconds,
               msg.c_str());
  WCHECK(st != DDP_OK, "rank %d: %s succeeded", rank, call);
  WCHECK(msg.find("nosuchif0") != std::string::npos, "rank %d: the reason is not rank 1's: %s", rank, msg.c_str());
  if (rank == 0) WCHECK(msg.find("rank 1") != std::string::npos, "rank 0 does not name rank 1: %s", msg.c_str());
  WCHECK(seconds < 10.0, "rank %d took %.2f s with a 30 s timeout", rank, seconds);
}

// One rank's backend cannot start: on rank 1, GLOO_SOCKET_IFNAME names no
// interface (on a lent GPU machine the same happens to a rank whose
// cuda:LOCAL_RANK does not exist). Rank 1 gets that error; rank 0, which
// waits inside Gloo's connect for rank 1's address, must get rank 1's reason
// within seconds, not at its 30 s timeout.
void scenario_backend_fails_on_one_rank() {
  const int rank = env_int("RANK", -1);
  ddp_group_options o = rank_one_without_interface(rank, "gloo");
  ddp_group* g = nullptr;
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_group_init(&g, nullptr, &o);
  expect_rank_ones_failure("ddp_group_init", rank, st, seconds_since(t0));
  if (g) ddp_group_free(g);
}

// The same for the Gloo that the shm backend makes on first use, for what
// it does not do itself (here a bool all-reduce): the group starts on every
// rank; the first such call fails on rank 1 and must end rank 0's within
// seconds, with rank 1's reason.
void scenario_shm_gloo_fails_on_one_rank() {
  const int rank = env_int("RANK", -1);
  ddp_group_options o = rank_one_without_interface(rank, "shm");
  ddp_group* g = nullptr;
  WOK(ddp_group_init(&g, nullptr, &o));
  WCHECK(std::string(ddp_group_backend(g)) == "shm", "backend %s", ddp_group_backend(g));
  bool flag[4] = {true, false, true, true};
  int64_t shape[1] = {4};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, flag, DDP_BOOL, shape, 1));
  auto t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_all_reduce(g, t, DDP_MAX);
  expect_rank_ones_failure("bool all_reduce", rank, st, seconds_since(t0));
  // A second call needing Gloo fails at once, on every rank (rank 1 does
  // not try to connect again, which would leave it waiting for rank 0).
  t0 = std::chrono::steady_clock::now();
  st = ddp_all_reduce(g, t, DDP_MAX);
  WCHECK(st != DDP_OK && seconds_since(t0) < 1.0, "rank %d: the second call -> %s after %.2f s", rank,
         ddp_status_string(st), seconds_since(t0));
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Rank 0, the store host, stops; the others free their group and join a
// new one on the same port. Rank 0's listening socket still takes their
// connections (the kernel completes them) but nothing answers: c10d's
// client constructor waited forever for its first answer. Each must get
// DDP_E_TIMEOUT naming the store within twice its timeout; rank 1 then
// kills rank 0.
void scenario_rejoin_while_the_store_host_is_stopped() {
  ddp_group* g = join_then_set_timeout(3000);
  const int rank = ddp_group_rank(g);
  const pid_t host = pid_of(g, 0);
  // A broadcast's root may return before the others have even finished
  // joining (it posts small ones): a barrier first, so that they have.
  WOK(ddp_barrier(g));
  if (rank == 0) raise(SIGSTOP);
  // Wait until rank 0 is stopped ('T' in /proc/<pid>/stat), so that the
  // joins below meet a stopped host and not a running one.
  for (int i = 0; i < 500; ++i) {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(host));
    FILE* f = std::fopen(path, "r");
    char state = '?';
    if (f) {
      (void)std::fscanf(f, "%*d (%*[^)]) %c", &state);
      std::fclose(f);
    }
    if (state == 'T' || state == 't') break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto t0 = std::chrono::steady_clock::now();
  ddp_group_free(g);
  const double freeing = seconds_since(t0);
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = 3000;
  ddp_group* again = nullptr;
  t0 = std::chrono::steady_clock::now();
  ddp_status st = ddp_group_init(&again, nullptr, &o);
  const double el = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] free took %.2f s; init -> %s after %.2f s: %s\n", rank, freeing,
               ddp_status_string(st), el, ddp_last_error_message());
  WCHECK(st == DDP_E_TIMEOUT && again == nullptr, "expected DDP_E_TIMEOUT, got %s", ddp_status_string(st));
  WCHECK(std::strstr(ddp_last_error_message(), "store") != nullptr, "the message does not name the store: %s",
         ddp_last_error_message());
  WCHECK(el < 7.0 && freeing < 7.0, "free took %.2f s and init %.2f s with a 3 s timeout", freeing, el);
  if (rank == 1) kill(host, SIGKILL);
  ddp_group_free(again);
}

// Each rank forks a child that never execs and lives on (a helper, a data
// worker), then frees its group and joins a new one on the same port. The
// child's copy of rank 0's listening socket kept the port taken: the
// second join failed on rank 0 ("port ... is already in use") and waited
// out its timeout on the others. Both joins must work, and the new group
// with them.
void scenario_rejoin_with_a_forked_child() {
  const char* backend = std::getenv("WORKER_BACKEND");
  ddp_group* g = join(20000, backend && *backend ? backend : nullptr);
  const int rank = ddp_group_rank(g);
  const pid_t child = fork();
  if (child == 0) {  // only async-signal-safe calls in the child of a threaded process
    sleep(60);
    _exit(0);
  }
  WCHECK(child > 0, "fork");
  WOK(ddp_barrier(g));
  ddp_group_free(g);
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = 20000;
  o.backend = backend && *backend ? backend : nullptr;
  ddp_group* again = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const ddp_status st = ddp_group_init(&again, nullptr, &o);
  WCHECK(st == DDP_OK, "rank %d: the second join with a forked child alive -> %s after %.2f s: %s", rank,
         ddp_status_string(st), seconds_since(t0), ddp_last_error_message());
  if (again) {
    float x = static_cast<float>(rank + 1);
    ddp_tensor* t = nullptr;
    WOK(ddp_tensor_from_blob(&t, &x, DDP_FLOAT32, nullptr, 0));
    WOK(ddp_all_reduce(again, t, DDP_SUM));
    const int n = ddp_group_size(again);
    WCHECK(x == n * (n + 1) / 2.0f, "rank %d: the new group's sum is %g", rank, x);
    ddp_tensor_free(t);
    ddp_group_free(again);
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

// The process starts with its standard streams closed (a daemon's): the
// group's connections must not take their numbers, where everything
// printed would go into a peer's protocol. Each is /dev/null after the
// join and after a subgroup is made; what the program then prints goes
// there, and the collectives and the store go on.
void scenario_closed_standard_streams() {
  const int report = fcntl(2, F_DUPFD_CLOEXEC, 100);  // this scenario's own stderr, kept aside
  for (int fd = 0; fd <= 2; ++fd) close(fd);
  auto streams = [&](const char* when) {
    std::string found;
    for (int fd = 0; fd <= 2; ++fd) {
      char link[64], target[256] = {0};
      std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
      if (readlink(link, target, sizeof target - 1) <= 0) std::strcpy(target, "(closed)");
      if (std::strcmp(target, "/dev/null") != 0) found += " " + std::to_string(fd) + " -> " + target;
    }
    if (!found.empty()) dprintf(report, "[rank %d] %s, a standard stream is not /dev/null:%s\n", g_rank, when, found.c_str());
    return found.empty();
  };
  ddp_group* g = join(20000);
  bool ok = streams("after the join");
  ddp_group* sub = nullptr;
  ok &= ddp_group_new_subgroups(g, 1, &sub) == DDP_OK;
  ok &= streams("after a subgroup");
  std::printf("what a program prints\n");
  std::fflush(stdout);
  std::fprintf(stderr, "and its warnings\n");
  float x[256];
  for (float& v : x) v = 1;
  int64_t shape[1] = {256};
  ddp_tensor* t = nullptr;
  ok &= ddp_tensor_from_blob(&t, x, DDP_FLOAT32, shape, 1) == DDP_OK;
  for (int i = 0; i < 20 && ok; ++i) ok &= ddp_all_reduce(g, t, DDP_SUM) == DDP_OK && ddp_barrier(g) == DDP_OK;
  ok &= x[0] == 1 << 20;  // 20 sums over 2 ranks
  ddp_tensor_free(t);
  ddp_group_free(sub);
  ddp_group_free(g);
  dup2(report, 2);  // the framework reports to stderr from here
  WCHECK(ok, "closed standard streams: see the lines above (x[0] = %g)", x[0]);
}


// A checkpoint_io save callback, which global rank 0 runs alone while its
// peers wait for the outcome, makes collective calls: the strategy's
// barrier and reduce, a barrier on the strategy's group, and a reducer
// (which agrees on its buckets with its peers). Each is
// DDP_E_STATE at once (each waited out the group's 30 s timeout on rank 0,
// the peers never joining it); the save finishes on every rank within
// seconds, and the group works after. DDP_TEST_FAIL_SAVE=1: the callback
// then fails the save, which every rank reports (DDP_E_IO) as promptly.
struct SoloStore {
  ddp_strategy* s = nullptr;
  std::string saved;
  int calls = 0;
  bool fail = false;
};

int solo_save(void* user, const char* path, const void* data, size_t len) {
  auto* st = static_cast<SoloStore*>(user);
  ++st->calls;
  const auto t0 = std::chrono::steady_clock::now();
  auto refused = [&](ddp_status got, const char* what) {
    WCHECK(got == DDP_E_STATE && std::strstr(ddp_last_error_message(), "which this rank runs alone"),
           "%s inside the save callback of %s: %s: %s", what, path, ddp_status_string(got), ddp_last_error_message());
  };
  refused(ddp_strategy_barrier(st->s, "inside the save"), "the strategy's barrier");
  float x[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, shape, 1));
  refused(ddp_strategy_reduce(st->s, t, DDP_SUM), "the strategy's reduce");
  refused(ddp_barrier(ddp_strategy_group(st->s)), "a barrier on the strategy's group");
  // A reducer agrees on its layout, and on shm on its shared buckets, with its peers.
  ddp_reducer_options ro = DDP_REDUCER_OPTIONS_INIT;
  ro.broadcast_parameters = 0;
  ro.gradient_as_bucket_view = 1;
  ddp_tensor* const no_grads[1] = {nullptr};
  ddp_reducer* r = nullptr;
  refused(ddp_reducer_new(&r, ddp_strategy_group(st->s), &t, no_grads, 1, &ro), "a reducer with bucket views");
  WCHECK(r == nullptr, "a refused ddp_reducer_new handed out a reducer");
  ddp_tensor_free(t);
  WCHECK(x[0] == 1 && x[3] == 4, "a refused reduce changed its tensor (%g %g)", x[0], x[3]);
  WCHECK(seconds_since(t0) < 2.0, "the refusals took %.2f s", seconds_since(t0));
  if (st->fail) return 7;
  st->saved.assign(static_cast<const char*>(data), len);
  return 0;
}

int solo_load(void*, const char*, ddp_byte_sink*) { return 2; }
int solo_remove(void*, const char*) { return 0; }

void scenario_collectives_in_a_rank_zero_callback() {
  SoloStore store;
  store.fail = env_int("DDP_TEST_FAIL_SAVE", 0) == 1;
  ddp_checkpoint_io io = {&store, solo_save, solo_load, solo_remove};
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.timeout_ms = 30000;
  so.devices = env_int("WORLD_SIZE", 1);
  so.checkpoint_io = &io;
  const char* backend = std::getenv("WORKER_BACKEND");
  so.backend = backend && *backend ? backend : nullptr;
  WOK(ddp_strategy_new(&store.s, &so));
  WOK(ddp_strategy_setup_environment(store.s));
  WCHECK(!so.backend || std::string(ddp_group_backend(ddp_strategy_group(store.s))) == so.backend,
         "asked for %s, got %s", so.backend, ddp_group_backend(ddp_strategy_group(store.s)));
  const int rank = ddp_strategy_global_rank(store.s);
  float w0[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  int64_t shape[1] = {8};
  ddp_tensor* w = nullptr;
  WOK(ddp_tensor_from_blob(&w, w0, DDP_FLOAT32, shape, 1));
  WOK(ddp_tensor_set_requires_grad(w, 1));
  const char* names[] = {"weight"};
  ddp_module* m = nullptr;
  WOK(ddp_module_from_tensors(&m, names, &w, nullptr, 1));
  WOK(ddp_strategy_setup_module(store.s, m));
  const auto t0 = std::chrono::steady_clock::now();
  const ddp_status st = ddp_strategy_save_checkpoint(store.s, "solo.ckpt", m, nullptr, 5, 1, nullptr, 0);
  const double took = seconds_since(t0);
  if (store.fail) {
    WCHECK(st == DDP_E_IO && std::strstr(ddp_last_error_message(), "save callback returned 7"),
           "a failed save gave %s: %s", ddp_status_string(st), ddp_last_error_message());
  } else {
    WOK(st);
    if (rank == 0) WCHECK(store.saved.size() > 100, "rank 0 saved %zu bytes", store.saved.size());
  }
  WCHECK(store.calls == (rank == 0 ? 1 : 0), "the save callback ran %d times on rank %d", store.calls, rank);
  WCHECK(took < 5.0, "the save took %.2f s on rank %d", took, rank);
  WOK(ddp_strategy_barrier(store.s, "after the save"));
  ddp_tensor_free(w);
  WOK(ddp_strategy_teardown(store.s));
  ddp_module_free(m);
  ddp_strategy_free(store.s);
}

}  // namespace

WORKER_SCENARIO("shm_gloo_fails_on_one_rank", scenario_shm_gloo_fails_on_one_rank);
WORKER_SCENARIO("closed_standard_streams", scenario_closed_standard_streams);
WORKER_SCENARIO("rejoin_with_a_forked_child", scenario_rejoin_with_a_forked_child);
WORKER_SCENARIO("collectives_in_a_rank_zero_callback", scenario_collectives_in_a_rank_zero_callback);
WORKER_SCENARIO("stopped_store_host", scenario_stopped_store_host);
WORKER_SCENARIO("free_while_the_store_host_is_stopped", scenario_free_while_the_store_host_is_stopped);
WORKER_SCENARIO("stopped_store_host_timeout_set_after_join", scenario_stopped_store_host_timeout_set_after_join);
WORKER_SCENARIO("subgroup_while_the_store_host_is_stopped", scenario_subgroup_while_the_store_host_is_stopped);
WORKER_SCENARIO("rejoin_while_the_store_host_is_stopped", scenario_rejoin_while_the_store_host_is_stopped);
WORKER_SCENARIO("backend_fails_on_one_rank", scenario_backend_fails_on_one_rank);
WORKER_SCENARIO("resumed_rank_reports_the_root_cause", scenario_resumed_rank_reports_the_root_cause);
WORKER_SCENARIO("rejoin_after_breakage", scenario_rejoin_after_breakage);
WORKER_SCENARIO("caller_memory_after_a_failed_wait", scenario_caller_memory_after_a_failed_wait);
WORKER_SCENARIO("caller_memory_of_a_freed_work", scenario_caller_memory_of_a_freed_work);
WORKER_SCENARIO("reducer_layouts_differ", scenario_reducer_layouts_differ);
WORKER_SCENARIO("free_reducer_with_bucket_in_flight", scenario_free_reducer_with_bucket_in_flight);
WORKER_SCENARIO("detail_mismatches", scenario_detail_mismatches);
WORKER_SCENARIO("size_mismatch_without_detail", scenario_size_mismatch_without_detail);
