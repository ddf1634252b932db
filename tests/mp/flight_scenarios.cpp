// hardening_worker scenarios for the flight recorder (issue 27): a rank that
// falls behind, ranks that call different collectives, a fatal signal, a dump
// on request. The test (test_flight_recorder_mp.cpp) reads the dumps at
// $DDP_FLIGHT_RECORDER_FILE and checks the verdict.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "worker_scenarios.h"

using namespace worker;

namespace {

// FLIGHT_GOOD (default 5) all-reduces of 4 floats that every rank makes.
// timeout_ms: the group's, unless FLIGHT_TIMEOUT_MS says otherwise.
ddp_group* join_and_agree(std::vector<float>& v, ddp_tensor** t, int timeout_ms = 2000) {
  ddp_group* g = join_then_set_timeout(env_int("FLIGHT_TIMEOUT_MS", timeout_ms));
  int64_t n[1] = {static_cast<int64_t>(v.size())};
  WOK(ddp_tensor_from_blob(t, v.data(), DDP_FLOAT32, n, 1));
  for (int i = 0; i < env_int("FLIGHT_GOOD", 5); ++i) WOK(ddp_all_reduce(g, *t, DDP_SUM));
  return g;
}

void report(const char* what, ddp_group* g, ddp_status st) {
  std::fprintf(stderr, "[rank %d] %s -> %s: %s\n", ddp_group_rank(g), what, ddp_status_string(st),
               ddp_last_error_message());
}

// FLIGHT_FAIL_JOB=1: a failed call ends the worker with exit code 1, as a
// real job would, so that a launcher sees the job fail.
void end_job_if_asked(ddp_status st) {
  if (st != DDP_OK && env_int("FLIGHT_FAIL_JOB", 0)) std::exit(1);
}

// Rank 1 stalls past the timeout before the next all-reduce: rank 0 times
// out in it, rank 1 arrives late and learns of the failure.
void scenario_flight_stalled_rank() {
  std::vector<float> v(4, 1.0f);
  ddp_tensor* t = nullptr;
  ddp_group* g = join_and_agree(v, &t);
  if (ddp_group_rank(g) == 1) std::this_thread::sleep_for(std::chrono::milliseconds(env_int("FLIGHT_STALL_MS", 4000)));
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  report("stalled all_reduce", g, st);
  WCHECK(st == DDP_E_TIMEOUT || st == DDP_E_PEER_FAILED, "got %s", ddp_status_string(st));
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Rank 1 stops (SIGSTOP) after the good all-reduces and a broadcast of its
// pid: rank 0 times out in the next all-reduce, dumps, and kills it, so
// rank 1 never writes a record.
void scenario_flight_stopped_rank() {
  std::vector<float> v(4, 1.0f);
  ddp_tensor* t = nullptr;
  ddp_group* g = join_and_agree(v, &t);
  int64_t pid = getpid();
  ddp_tensor* p = nullptr;
  WOK(ddp_tensor_from_blob(&p, &pid, DDP_INT64, nullptr, 0));
  WOK(ddp_broadcast(g, p, 1));
  ddp_tensor_free(p);
  if (ddp_group_rank(g) == 1) raise(SIGSTOP);
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  report("all_reduce with a stopped peer", g, st);
  WCHECK(st == DDP_E_TIMEOUT, "got %s", ddp_status_string(st));
  kill(static_cast<pid_t>(pid), SIGKILL);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Rank 1 all-reduces 8 floats where the others all-reduce 4.
void scenario_flight_mismatched_sizes() {
  std::vector<float> v(8, 1.0f);
  ddp_tensor* t = nullptr;
  ddp_group* g = join_and_agree(v, &t);
  std::vector<float> w(ddp_group_rank(g) == 1 ? 8 : 4, 1.0f);
  int64_t n[1] = {static_cast<int64_t>(w.size())};
  ddp_tensor* u = nullptr;
  WOK(ddp_tensor_from_blob(&u, w.data(), DDP_FLOAT32, n, 1));
  ddp_status st = ddp_all_reduce(g, u, DDP_SUM);
  report("mismatched all_reduce", g, st);
  WCHECK(st != DDP_OK, "a mismatched all_reduce returned OK");
  end_job_if_asked(st);
  ddp_tensor_free(u);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Rank 1 broadcasts where rank 0 all-reduces (same size and dtype).
void scenario_flight_mismatched_ops() {
  std::vector<float> v(4, 1.0f);
  ddp_tensor* t = nullptr;
  ddp_group* g = join_and_agree(v, &t);
  ddp_status st = ddp_group_rank(g) == 1 ? ddp_broadcast(g, t, 0) : ddp_all_reduce(g, t, DDP_SUM);
  report("mismatched op", g, st);
  // Gloo may pair a broadcast with an all-reduce of the same bytes without
  // noticing: the verdict must name the disagreement either way.
  if (st == DDP_OK) raise(SIGUSR2);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// After the good all-reduces rank 1 dies of SIGABRT; its handler dumps.
void scenario_flight_fatal_signal() {
  std::vector<float> v(4, 1.0f);
  ddp_tensor* t = nullptr;
  ddp_group* g = join_and_agree(v, &t);
  if (ddp_group_rank(g) == 1) std::abort();
  ddp_status st = ddp_all_reduce(g, t, DDP_SUM);
  WCHECK(st != DDP_OK, "an all-reduce with a dead peer returned OK");
  ddp_tensor_free(t);
  ddp_group_free(g);
}

// Every rank asks for a dump with SIGUSR2 after the good all-reduces and
// goes on: the job succeeds and the dumps hold only completed entries.
void scenario_flight_dump_on_request() {
  std::vector<float> v(4, 1.0f);
  ddp_tensor* t = nullptr;
  // No peer fails here: 2 s only made the rendezvous of an ASan build on a
  // loaded host time out (three tests at a time on 2 cores).
  ddp_group* g = join_and_agree(v, &t, 60000);
  raise(SIGUSR2);
  WOK(ddp_barrier(g));
  ddp_tensor_free(t);
  ddp_group_free(g);
}

}  // namespace

WORKER_SCENARIO("flight_stalled_rank", scenario_flight_stalled_rank);
WORKER_SCENARIO("flight_stopped_rank", scenario_flight_stopped_rank);
WORKER_SCENARIO("flight_mismatched_sizes", scenario_flight_mismatched_sizes);
WORKER_SCENARIO("flight_mismatched_ops", scenario_flight_mismatched_ops);
WORKER_SCENARIO("flight_fatal_signal", scenario_flight_fatal_signal);
WORKER_SCENARIO("flight_dump_on_request", scenario_flight_dump_on_request);
