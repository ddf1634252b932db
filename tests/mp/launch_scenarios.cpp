// mp_worker scenarios: Behaviours a launcher must handle: a failing rank 0, a first round that dies, a rank that ends before joining, a sleeper.
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

}  // namespace

WORKER_SCENARIO("exit_rank0", scenario_exit_rank0);
WORKER_SCENARIO("die_first_round", scenario_die_first_round);
WORKER_SCENARIO("quit_before_join", scenario_quit_before_join);
WORKER_SCENARIO("sleep", scenario_sleep);
