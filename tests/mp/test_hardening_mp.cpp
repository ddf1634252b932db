// Fault injection across real ranks (issue 10): stopped store hosts,
// resumed ranks, broken groups rejoined on the same port, mismatched layouts.
#include <gtest/gtest.h>

#include <string>

#include "launcher.h"

namespace {

std::string hardening_worker() {
  std::string mp = ddptest::worker_path();
  return mp.substr(0, mp.rfind('/')) + "/hardening_worker";
}

ddptest::RunResult run(int world, const std::string& scenario, double limit, std::vector<std::string> env = {}) {
  static int n = 0;
  std::string tag = "hardening-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  env.push_back("DDP_TEST_TAG=" + tag);
  auto res = ddptest::run_ranks(world, {hardening_worker(), scenario}, env, limit);
  EXPECT_FALSE(res.timed_out) << res.summary();
  EXPECT_FALSE(ddptest::any_process_tagged(tag)) << "a worker outlived the test";
  return res;
}

void expect_ok(const ddptest::RunResult& res, int except = -1) {
  for (size_t r = 0; r < res.ranks.size(); ++r) {
    if (static_cast<int>(r) == except) continue;
    EXPECT_EQ(res.ranks[r].exit_code, 0) << "rank " << r << "\n" << res.summary();
    EXPECT_EQ(res.ranks[r].signal, 0) << "rank " << r << "\n" << res.summary();
  }
}

// Ranks started with their standard streams closed: their connections
// took descriptors 0 to 2, and what the program printed went into them.
TEST(Hardening, ClosedStandardStreamsAreNotTakenByConnections) {
  for (const char* backend : {"WORKER_BACKEND=gloo", "WORKER_BACKEND=shm"})
    expect_ok(run(2, "closed_standard_streams", 60, {backend}));
}

TEST(Hardening, StoppedStoreHostGivesTimeoutWithinTheTimeout) {
  auto res = run(2, "stopped_store_host", 40);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_ok(res, 0);
}

TEST(Hardening, StoppedStoreHostGivesTimeoutWithinATimeoutSetAfterJoining) {
  auto res = run(2, "stopped_store_host_timeout_set_after_join", 60);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_ok(res, 0);
}

TEST(Hardening, ASubgroupMadeWhileTheStoreHostIsStoppedTimesOutWithinATimeoutSetAfterJoining) {
  auto res = run(2, "subgroup_while_the_store_host_is_stopped", 60);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_ok(res, 0);
}

TEST(Hardening, FreeWhileTheStoreHostIsStoppedLeavesNoWatcherThread) {
  auto res = run(2, "free_while_the_store_host_is_stopped", 60);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_ok(res, 0);
}

TEST(Hardening, RejoiningWhileTheStoreHostIsStoppedGivesTimeoutWithinTheTimeout) {
  auto res = run(3, "rejoin_while_the_store_host_is_stopped", 40);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_ok(res, 0);
}

TEST(Hardening, AResumedRankReportsTheRootCause) { expect_ok(run(3, "resumed_rank_reports_the_root_cause", 60)); }

// Gloo's work, or the shm backend's worker thread (which a host without a
// core to spare per rank does not use unless told to).
TEST(Hardening, NoBackendTouchesTheCallersMemoryAfterAFailedWait) {
  for (const char* backend : {"WORKER_BACKEND=gloo", "WORKER_BACKEND=shm"}) {
    SCOPED_TRACE(backend);
    expect_ok(run(2, "caller_memory_after_a_failed_wait", 60, {backend, "DDP_SHM_INLINE=0"}));
  }
}

// The same for a work freed unwaited, its peer stopped inside the
// collective (Gloo, and the bool all-reduce shm hands to Gloo: on a copy,
// the free at once) or before it (shm, in place on its worker: waited for
// by the free).
TEST(Hardening, NoBackendTouchesTheCallersMemoryAfterItsWorkIsFreed) {
  const std::vector<std::vector<std::string>> cases = {
      {"WORKER_BACKEND=gloo", "DDP_TEST_STOP_INSIDE=1", "DDP_TEST_FREE_AT_ONCE=1"},
      {"WORKER_BACKEND=shm", "DDP_TEST_STOP_INSIDE=1", "DDP_TEST_BOOL=1", "DDP_TEST_FREE_AT_ONCE=1"},
      {"WORKER_BACKEND=shm", "DDP_SHM_INLINE=0"},
      {"WORKER_BACKEND=shm", "DDP_SHM_INLINE=0", "DDP_TEST_STOP_INSIDE=1"}};
  for (const auto& env : cases) {
    std::string trace;
    for (const auto& e : env) trace += e + " ";
    SCOPED_TRACE(trace);
    expect_ok(run(2, "caller_memory_of_a_freed_work", 60, env));
  }
  // The peer killed inside the collective instead: shm's collective, and
  // the free that waits for it, end at once (the group's timeout is 20 s).
  auto res = run(2, "caller_memory_of_a_freed_work", 60,
                 {"WORKER_BACKEND=shm", "DDP_SHM_INLINE=0", "DDP_TEST_STOP_INSIDE=1", "DDP_TEST_KILL_PEER=1"});
  EXPECT_EQ(res.ranks[1].signal, 9) << res.summary();
  expect_ok(res, 1);
}

// Collective calls from a checkpoint_io save callback, which global rank 0
// runs alone: refused at once instead of waiting out the timeout, on Gloo
// and shm; the save then succeeds, or fails on every rank if the callback
// fails it.
TEST(Hardening, CollectivesFromACallbackThatRankZeroRunsAloneAreRefusedAtOnce) {
  for (const char* backend : {"WORKER_BACKEND=gloo", "WORKER_BACKEND=shm"})
    for (const char* fail : {"DDP_TEST_FAIL_SAVE=0", "DDP_TEST_FAIL_SAVE=1"}) {
      SCOPED_TRACE(std::string(backend) + " " + fail);
      expect_ok(run(2, "collectives_in_a_rank_zero_callback", 60, {backend, fail}));
    }
  // With the cross-rank call checks on, which compare each call with the
  // peers' before it starts: refused before that comparison too.
  SCOPED_TRACE("DDP_DEBUG=DETAIL");
  expect_ok(run(2, "collectives_in_a_rank_zero_callback", 60, {"WORKER_BACKEND=gloo", "DDP_DEBUG=DETAIL"}));
}

TEST(Hardening, ABrokenGroupIsRejoinedOnTheSamePort) { expect_ok(run(2, "rejoin_after_breakage", 90)); }

// A child each rank forked without exec lives on while the group is set up
// again on the same port (its copy of rank 0's listening socket kept the
// port taken), on Gloo and shm.
TEST(Hardening, AGroupIsSetUpAgainOnTheSamePortWhileAForkedChildLives) {
  for (const char* backend : {"WORKER_BACKEND=gloo", "WORKER_BACKEND=shm"}) {
    SCOPED_TRACE(backend);
    expect_ok(run(2, "rejoin_with_a_forked_child", 60, {backend}));
  }
}

TEST(Hardening, DifferentReducerLayoutsAreRefusedOnEveryRank) { expect_ok(run(2, "reducer_layouts_differ", 60)); }

TEST(Hardening, FreeingAReducerWaitsForItsBucketInFlight) {
  expect_ok(run(2, "free_reducer_with_bucket_in_flight", 60));
}

TEST(Hardening, DetailModeRefusesMismatchedCallsOnEveryRank) {
  auto res = run(2, "detail_mismatches", 90, {"DDP_DEBUG=DETAIL"});
  expect_ok(res);
  std::printf("%s", res.ranks[0].output.c_str());
}

TEST(Hardening, ABackendThatFailsOnOneRankStopsEveryRankWithItsReason) {
  expect_ok(run(2, "backend_fails_on_one_rank", 60));
}

TEST(Hardening, TheShmBackendsGlooFailingOnOneRankStopsEveryRankWithItsReason) {
  expect_ok(run(2, "shm_gloo_fails_on_one_rank", 60));
}

TEST(Hardening, MismatchedSizesWithoutDetailAbortNoProcess) { expect_ok(run(2, "size_mismatch_without_detail", 60)); }

}  // namespace
