// mp_worker scenarios: Behaviours a launcher must handle: a failing rank 0, a first round that dies, a rank that ends before joining, a sleeper.
#include <signal.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include "worker_util.h"
#include "worker_scenarios.h"

using namespace worker;

namespace {

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

// A node that stops without closing anything: every rank all-reduces in a
// loop under a 10-minute timeout; the ranks of node 1 (GROUP_RANK 1) touch
// DDP_TEST_MARK.<rank> and stop themselves (SIGSTOP) at iteration 3, and
// the test stops node 1's agent. Node 0's ranks must hear of it from their
// agent's heartbeat, not from the collective's timeout.
void scenario_node_stops() {
  ddp_group* g = join(600000);
  std::vector<float> x(1 << 10, 1.0f);
  int64_t s[1] = {static_cast<int64_t>(x.size())};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, x.data(), DDP_FLOAT32, s, 1));
  const bool stops = env_int("GROUP_RANK", 0) == 1;
  const char* mark = std::getenv("DDP_TEST_MARK");
  auto [st, el] = all_reduce_until_failure(g, t, 1000000, [&](int it) {
    if (!stops || it != 3) return;
    if (mark) std::fclose(std::fopen((std::string(mark) + "." + std::to_string(g_rank)).c_str(), "w"));
    raise(SIGSTOP);
  });
  WCHECK(st == DDP_E_PEER_FAILED, "expected DDP_E_PEER_FAILED, got %s", ddp_status_string(st));
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// A rank that joined and then does nothing for DDP_TEST_IDLE_S seconds (10)
// before a barrier: what a group costs while idle (bench/run_liveness_cost.sh).
void scenario_joined_idle() {
  ddp_group* g = join(600000);
  std::printf("joined\n");
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(env_int("DDP_TEST_IDLE_S", 10)));
  WOK(ddp_barrier(g));
  ddp_group_free(g);
}

}  // namespace

WORKER_SCENARIO("joined_idle", scenario_joined_idle);
WORKER_SCENARIO("node_stops", scenario_node_stops);
WORKER_SCENARIO("exit_rank0", scenario_exit_rank0);
WORKER_SCENARIO("die_first_round", scenario_die_first_round);
WORKER_SCENARIO("quit_before_join", scenario_quit_before_join);
WORKER_SCENARIO("sleep", scenario_sleep);
