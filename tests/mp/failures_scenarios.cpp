// mp_worker scenarios: Failures seen from the ranks: timeouts, a dead peer, a rendezvous that does not complete, a stalled rank.
#include <signal.h>
#include <spawn.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>
#include "worker_util.h"
#include "worker_scenarios.h"

using namespace worker;

namespace {

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


// A process the victim starts after joining and that outlives the victim;
// 0 where there is none. `how` 1: posix_spawn, as system() and Rust's
// Command start one (every descriptor not marked close-on-exec goes with
// it); 2: fork alone, a child that never execs (every descriptor goes with
// it). Its pid reaches every rank through the group, so rank 0 can end it.
int64_t start_child_that_outlives(ddp_group* g, int victim, int how) {
  int64_t pid = 0;
  if (ddp_group_rank(g) == victim) {
    pid_t child = 0;
    if (how == 2) {
      child = fork();
      if (child == 0) {  // only async-signal-safe calls in the child of a threaded process
        sleep(60);
        _exit(0);
      }
      WCHECK(child > 0, "fork");
    } else {
      char arg0[] = "sleep", arg1[] = "60";
      char* argv[] = {arg0, arg1, nullptr};
      WCHECK(posix_spawnp(&child, "sleep", nullptr, nullptr, argv, environ) == 0, "posix_spawnp sleep");
    }
    pid = child;
  }
  ddp_tensor* pt = nullptr;
  WOK(ddp_tensor_from_blob(&pt, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_broadcast(g, pt, victim));
  ddp_tensor_free(pt);
  return pid;
}

// DDP_TEST_VICTIM SIGKILLs itself with an all_reduce in flight; the others
// must get DDP_E_PEER_FAILED within seconds (the group timeout is 120 s).
// With DDP_TEST_CHILD=1 (posix_spawn) or 2 (fork alone) the victim has
// started a process that outlives it and holds whatever descriptors it
// inherited: the victim's connections must not be among them, or its peers
// would wait out the timeout.
void scenario_peer_death() {
  ddp_group* g = join(120000);
  int rank = ddp_group_rank(g);
  int victim = env_int("DDP_TEST_VICTIM", 1);
  const int how = env_int("DDP_TEST_CHILD", 0);
  const int64_t child = how ? start_child_that_outlives(g, victim, how) : 0;
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
  if (child > 0 && rank == 0) kill(static_cast<pid_t>(child), SIGKILL);
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
  // DDP_TEST_EXPECT: what the message must say; "A|B": either.
  const char* want = std::getenv("DDP_TEST_EXPECT");
  bool said = !want;
  for (std::string rest = want ? want : ""; want && !said;) {
    auto bar = rest.find('|');
    said = std::strstr(ddp_last_error_message(), rest.substr(0, bar).c_str()) != nullptr;
    if (bar == std::string::npos) break;
    rest = rest.substr(bar + 1);
  }
  WCHECK(said, "message lacks '%s'", want);
  WCHECK(el < 2.0 * o.timeout_ms / 1000.0 + 1, "took %.2f s", el);
  // Rank 0 hosts the store: it stays one more timeout, so that a rank that
  // started later reaches its own deadline instead of losing the store (seen
  // on loaded machines with 1.5 s: an ASan run started rank 1 later still).
  if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.timeout_ms));
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

}  // namespace

WORKER_SCENARIO("timeout", scenario_timeout);
WORKER_SCENARIO("peer_death", scenario_peer_death);
WORKER_SCENARIO("rendezvous_timeout", scenario_rendezvous_timeout);
WORKER_SCENARIO("stall", scenario_stall);
