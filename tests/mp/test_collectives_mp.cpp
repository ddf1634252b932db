// Multi-process tests: real ranks, real Gloo on loopback.
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "launcher.h"

using ddptest::run_ranks;
using ddptest::worker_path;

namespace {

std::string unique_tag() {
  static int n = 0;
  return std::to_string(getpid()) + "-" + std::to_string(++n);
}

// Runs the scenario and checks that every rank passed and none is left over.
ddptest::RunResult run(int world, const std::string& scenario, std::vector<std::string> env = {},
                       double limit = 120, std::vector<int> skip = {}) {
  std::string tag = unique_tag();
  env.push_back("DDP_TEST_TAG=" + tag);
  auto res = run_ranks(world, {worker_path(), scenario}, env, limit, skip);
  EXPECT_FALSE(res.timed_out) << res.summary();
  EXPECT_FALSE(ddptest::any_process_tagged(tag)) << "a worker outlived the test";
  return res;
}

void expect_all_ok(const ddptest::RunResult& res, std::vector<int> except = {}) {
  for (size_t r = 0; r < res.ranks.size(); ++r) {
    bool skip = false;
    for (int e : except) skip |= e == static_cast<int>(r);
    if (skip) continue;
    EXPECT_EQ(res.ranks[r].exit_code, 0) << "rank " << r << "\n" << res.summary();
    EXPECT_EQ(res.ranks[r].signal, 0) << "rank " << r << "\n" << res.summary();
  }
}

class Worlds : public ::testing::TestWithParam<int> {};

TEST_P(Worlds, EveryCollectiveEveryDtype) { expect_all_ok(run(GetParam(), "collectives")); }

TEST_P(Worlds, TimeoutWhenOneRankSkipsACollective) {
  expect_all_ok(run(GetParam(), "timeout", {"DDP_TEST_TIMEOUT_MS=2000"}, 60));
}

TEST_P(Worlds, PeerKilledMidAllReduceGivesPeerFailed) {
  auto res = run(GetParam(), "peer_death", {"DDP_TEST_VICTIM=1"}, 60);
  EXPECT_EQ(res.ranks[1].signal, 9) << res.summary();
  expect_all_ok(res, {1});
}

// The same with the victim's own child alive past it (started after the
// join, as system() or a Command would start one, or made by fork alone):
// the connections it inherited would keep the victim's end open, and every
// peer would wait out the 120 s timeout instead of seeing the death.
TEST_P(Worlds, PeerKilledWithAChildOutlivingItGivesPeerFailed) {
  for (const char* backend : {"WORKER_BACKEND=gloo", "WORKER_BACKEND=shm"})
    for (const char* child : {"DDP_TEST_CHILD=1", "DDP_TEST_CHILD=2"}) {
      auto res = run(GetParam(), "peer_death", {"DDP_TEST_VICTIM=1", child, backend}, 60);
      EXPECT_EQ(res.ranks[1].signal, 9) << backend << " " << child << "\n" << res.summary();
      expect_all_ok(res, {1});
    }
}

TEST_P(Worlds, ReducerAveragesCallerOwnedGradients) { expect_all_ok(run(GetParam(), "reducer")); }

TEST_P(Worlds, ReducerWithTheAllreduceCommHook) { expect_all_ok(run(GetParam(), "allreduce_hook")); }

INSTANTIATE_TEST_SUITE_P(Ranks, Worlds, ::testing::Values(2, 4));

// The shared-memory backend: Gloo's results, and no segment left behind.
std::vector<std::string> dev_shm_entries() {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

class ShmWorlds : public ::testing::TestWithParam<int> {
 protected:
  // `scenario` passes on every rank, then again with rank 1 killing itself
  // part way (DDP_TEST_VICTIM=1): every survivor passes its checks of the
  // status it got, and nothing is left in /dev/shm.
  void expect_attack_survived(const std::string& scenario) {
    expect_all_ok(run(GetParam(), scenario, {}, 60));
    auto before = dev_shm_entries();
    auto res = run(GetParam(), scenario, {"DDP_TEST_VICTIM=1"}, 60);
    EXPECT_EQ(res.ranks[1].signal, 9) << res.summary();
    expect_all_ok(res, {1});
    EXPECT_EQ(dev_shm_entries(), before) << "a shared-memory object outlived the job";
  }
};

// Each setting below makes shm take other paths; Gloo's results do not
// depend on them, so each scenario runs Gloo once and shm under each
// (DDP_TEST_SHM_SETTINGS, tests/mp/worker_scenarios.h):
//  - as shm chooses on this host;
//  - DDP_SHM_CMA=0: broadcasts of more than 32 KiB up to a slot read the
//    root's tensor from its process where the host allows it and has a core
//    for each rank (2 ranks here); this keeps them in the slots, as elsewhere;
//  - DDP_SHM_STREAMING=1 and =0: a reduce writes what its peers read either
//    through its caches or streamed past them, as local rank 0 measures
//    faster (shm/write_mode.h), so a run may take either; each is forced;
//  - DDP_TEST_ONE_CPU_RANK=1: one rank on one CPU finds the host crowded
//    where its peers may not: the ranks agree on it when the segment opens,
//    so each call takes one path on all of them (a 9 KiB or 18 KiB
//    all-reduce took one barrier on the pinned rank and two on the others);
//  - DDP_SHM_INLINE=0: where the host's ranks leave no core to spare (this
//    test machine), shm performs every collective on the caller's thread;
//    this puts those over 4 MiB on its worker thread again, as on a larger
//    host.
const char* const kShmSettings =
    "DDP_TEST_SHM_SETTINGS=default;DDP_SHM_CMA=0;DDP_SHM_STREAMING=1;DDP_SHM_STREAMING=0;"
    "DDP_TEST_ONE_CPU_RANK=1;DDP_SHM_INLINE=0";

TEST_P(ShmWorlds, EveryCollectiveDtypeAndOpGivesGloosResultUnderEachSetting) {
  expect_all_ok(run(GetParam(), "shm_matches_gloo", {kShmSettings}, 600));
}

// The reducer on shm reduces gradients where they lie, the scaled gradient
// parts included; Gloo through buckets: the same bits under each setting.
TEST_P(ShmWorlds, ReducerInPlaceGivesTheBucketsBitsUnderEachSetting) {
  expect_all_ok(run(GetParam(), "reducer_shm_matches_gloo",
                    {"DDP_TEST_SHM_SETTINGS=default;DDP_SHM_STREAMING=1;DDP_SHM_STREAMING=0;DDP_SHM_INLINE=0"}, 300));
}

TEST_P(ShmWorlds, RootKilledWhileItsBroadcastsAreReadGivesPeerFailed) {
  const int root = GetParam() - 1;
  for (int k = 0; k < 3; ++k) {
    auto res = run(GetParam(), "shm_root_death_while_read", {}, 60);
    EXPECT_EQ(res.ranks[root].signal, 9) << res.summary();
    expect_all_ok(res, {root});
  }
}

// The same with a peer killed: the root may be writing its share into it.
TEST_P(ShmWorlds, PeerKilledWhileTheRootWritesIntoItGivesPeerFailed) {
  for (int k = 0; k < 3; ++k) {
    auto res = run(GetParam(), "shm_root_death_while_read", {"DDP_TEST_VICTIM=0"}, 60);
    EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
    expect_all_ok(res, {0});
  }
}

TEST_P(ShmWorlds, KilledRankGivesPeerFailedAndLeavesNoSharedMemory) {
  auto before = dev_shm_entries();
  auto res = run(GetParam(), "shm_peer_death", {"DDP_TEST_VICTIM=1"}, 60);
  EXPECT_EQ(res.ranks[1].signal, 9) << res.summary();
  expect_all_ok(res, {1});
  EXPECT_EQ(dev_shm_entries(), before) << "a shared-memory object outlived the job";
}

// An async collective on caller memory that shm performs itself works on
// that memory as it is: a small one is done when the call returns; one
// queued behind the worker's is right after its wait, or waited for by
// the free of its work.
TEST_P(ShmWorlds, AsyncCollectivesOnCallerMemoryWorkInPlaceAndAFreedOneIsWaitedFor) {
  expect_all_ok(run(GetParam(), "shm_async_at_once", {}, 60));
  expect_all_ok(run(GetParam(), "shm_async_at_once", {"DDP_SHM_INLINE=0"}, 60));
}

// With gradient_as_bucket_view the buckets live in memory every rank maps,
// reduced where they lie: still the bits Gloo's buckets get.
// The switch for measuring (DDP_SHM_SHARED_BUCKETS=0) keeps them in private
// memory, with the same bits.
TEST_P(ShmWorlds, ReducerWithSharedBucketViewsGivesGloosBits) {
  expect_all_ok(run(GetParam(), "reducer_shm_matches_gloo",
                    {"DDP_TEST_BUCKET_VIEW=1", "DDP_TEST_SHM_SETTINGS=default;DDP_SHM_SHARED_BUCKETS=0"}, 180));
  // static_graph, whose first step reduces every bucket inside finish.
  expect_all_ok(run(GetParam(), "reducer_shm_matches_gloo", {"DDP_TEST_BUCKET_VIEW=1", "DDP_TEST_STATIC_GRAPH=1"}, 120));
}

// A gradient view reduced on its own, a shared bucket against an ordinary
// tensor (refused everywhere, the group usable), and a rank killed between
// reducer steps: a status on every survivor, nothing left in /dev/shm.
TEST_P(ShmWorlds, SharedBucketsAttacked) { expect_attack_survived("shm_shared_buckets"); }

// Broadcasts whose root returns once it has posted them (at most 4 KiB):
// roots in turn between other collectives, mismatches that reach the root
// at its next call on every rank, and a rank killed while rank 0 posts.
// A rank's barrier looks for sleeping peers without a full fence and the
// sleepers fence instead (common/asymmetric_fence.h); with
// DDP_SHM_LIGHT_WAKES=0 both sides fence fully. Either way a wait that slept
// is woken by its peer's barrier, whether the ranks spin first (2 ranks
// here) or not (3 and 4 ranks on 2 cores).
TEST_P(ShmWorlds, ASleepingWaitIsWokenByItsPeersBarrierNotItsSleepSlice) {
  expect_all_ok(run(GetParam(), "shm_sleeping_wait_wakes", {}, 60));
  expect_all_ok(run(GetParam(), "shm_sleeping_wait_wakes", {"DDP_SHM_LIGHT_WAKES=0"}, 60));
}

TEST_P(ShmWorlds, PostedBroadcastsAttacked) { expect_attack_survived("shm_posted_broadcast"); }

// A peer whose broadcast fails while the root writes its share into the
// peer's tensor returns only once that write has ended (the root's write is
// held by a page fault the peer serves late, through userfaultfd).
TEST(ShmWriteWindow, AFailedPeerReturnsOnlyAfterTheRootsWriteIntoItEnded) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "skipped: 2 ranks need 2 cores to copy between their tensors";
  // Yama lets sibling processes reach each other's memory only at scope 0,
  // or with CAP_SYS_PTRACE at 1 and 2; elsewhere the ranks use the slots.
  int scope = 0;
  if (FILE* f = std::fopen("/proc/sys/kernel/yama/ptrace_scope", "r")) {
    if (std::fscanf(f, "%d", &scope) != 1) scope = 0;
    std::fclose(f);
  }
  if (scope >= 3 || (scope >= 1 && geteuid() != 0))
    GTEST_SKIP() << "skipped: Yama's ptrace_scope " << scope << " keeps ranks out of each other's memory";
  const long fd = syscall(SYS_userfaultfd, O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "skipped: userfaultfd is not allowed here (" << std::strerror(errno) << ")";
  close(static_cast<int>(fd));
  auto res = run(2, "shm_write_window", {}, 60);
  expect_all_ok(res);
}

// Broadcasts of more than 32 KiB, copied straight between the tensors (the
// root writes into its peers), with a smaller tensor or another root on one
// rank: refused on every rank before any copy, nothing written past a tensor.
TEST_P(ShmWorlds, CopiedBroadcastMismatchesAreRefusedBeforeAnyCopy) {
  expect_all_ok(run(GetParam(), "shm_copied_broadcast_mismatches", {}, 60));
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmWorlds, ::testing::Values(2, 3, 4));

// A rank killed or stopped at a random moment of shared-bucket work (making
// segments through the store, rank 0 being its host; a shared reduce; a
// posted broadcast): every survivor fails within twice the timeout with a
// status and a message, frees everything, and nothing is left in /dev/shm.
// Shared buckets in three groups in turn on the same port (new segments
// each time, through each group's store), the last group's handle freed
// before its reducer: every step averages right.
TEST(ShmFaults, SharedBucketsAcrossTeardownsOnTheSamePort) {
  auto before = dev_shm_entries();
  expect_all_ok(run(2, "shm_shared_buckets_rejoin", {}, 60));  // 2 ranks: the average is exact
  EXPECT_EQ(dev_shm_entries(), before) << "a shared-memory object outlived the job";
}

// The stopped store host is tried three times: c10d's client, unbounded,
// waited forever in about one run of two where the delay fell into a
// segment's making (connect_store bounds its reads now).
TEST(ShmFaults, ARankKilledOrStoppedAtARandomMomentOfSharedBucketWork) {
  const std::vector<std::pair<const char*, int>> faults = {{"kill", 0}, {"kill", 2}, {"stop", 2},
                                                           {"stop", 0}, {"stop", 0}, {"stop", 0}};
  for (const auto& [fault, victim] : faults) {
    SCOPED_TRACE(std::string(fault) + " rank " + std::to_string(victim));
    auto before = dev_shm_entries();
    auto res = run(3, "shm_shared_bucket_faults",
                   {"DDP_TEST_VICTIM=" + std::to_string(victim), std::string("DDP_TEST_FAULT=") + fault}, 30);
    EXPECT_EQ(res.ranks[victim].signal, 9) << res.summary();
    expect_all_ok(res, {victim});
    EXPECT_EQ(dev_shm_entries(), before) << "a shared-memory object outlived the job";
  }
}

// A rank stopped behind posted broadcasts (rank 0 the root): the
// survivors time out and name the stopped rank, also where it is not the
// root and the other peers waited for the root alone.
TEST(ShmFaults, StoppedRankBehindPostedBroadcastsIsTheOneNamed) {
  for (auto [world, victim] : std::vector<std::pair<int, int>>{{3, 2}, {3, 0}, {4, 2}}) {
    SCOPED_TRACE(std::to_string(world) + " ranks, stopped rank " + std::to_string(victim));
    auto res = run(world, "shm_stalled_peer", {"DDP_TEST_VICTIM=" + std::to_string(victim)}, 30);
    EXPECT_EQ(res.ranks[victim].signal, 9) << res.summary();
    expect_all_ok(res, {victim});
  }
}

// Two simulated nodes of two ranks (NODE_RANK differs): shared memory inside
// each, Gloo between their local rank 0s.
TEST(ShmHierarchical, TwoNodesGiveGloosResults) {
  expect_all_ok(run(4, "shm_matches_gloo", {"LOCAL_WORLD_SIZE=2"}, 300));
}

TEST(ShmHierarchical, KilledRankOnOneNodeStopsEveryRankOfBoth) {
  auto before = dev_shm_entries();
  auto res = run(4, "shm_peer_death", {"LOCAL_WORLD_SIZE=2", "DDP_TEST_VICTIM=3"}, 60);
  EXPECT_EQ(res.ranks[3].signal, 9) << res.summary();
  expect_all_ok(res, {3});
  EXPECT_EQ(dev_shm_entries(), before) << "a shared-memory object outlived the job";
}

TEST(Reducer, CustomCHook) { expect_all_ok(run(2, "custom_hook")); }
TEST(Reducer, CustomCHookErrorOnOneRankFailsEveryRank) {
  expect_all_ok(run(3, "custom_hook_error", {"DDP_TEST_HOOK_FAILS_ON=1"}, 60));
  expect_all_ok(run(3, "custom_hook_error", {"DDP_TEST_HOOK_FAILS_ON=1", "DDP_TEST_HOOK_RETURNS=7"}, 60));
}

TEST(Reducer, PostLocalSgdWithPeriodicModelAveraging) {
  expect_all_ok(run(4, "post_localsgd", {"LOCAL_WORLD_SIZE=2"}, 120));
}

TEST(Reducer, PowerSgdRecoversRankOneAveragesIdenticallyOnEveryRank) { expect_all_ok(run(3, "powersgd", {}, 120)); }

TEST(Reducer, JoinWithThreeFiveAndEightBatches) { expect_all_ok(run(3, "join", {}, 120)); }

TEST(Collectives, StoppedRankGivesTimeoutWithinTwiceTheTimeout) {
  auto res = run(3, "stall", {"DDP_TEST_TIMEOUT_MS=5000", "DDP_TEST_VICTIM=1"}, 60);
  EXPECT_EQ(res.ranks[1].signal, 9) << res.summary();
  expect_all_ok(res, {1});
}

TEST(Collectives, BadArgumentsAreRejectedAndTheGroupSurvives) { expect_all_ok(run(2, "invalid")); }

TEST(Collectives, StoreHostKilledGivesPeerFailedEverywhere) {
  auto res = run(4, "peer_death", {"DDP_TEST_VICTIM=0"}, 60);
  EXPECT_EQ(res.ranks[0].signal, 9) << res.summary();
  expect_all_ok(res, {0});
}

// Each rank's deadline runs from its own start, so both see the other only if
// they start less than the timeout apart: 6 s, since a fresh-clone CI run on
// a loaded 2-core machine once started rank 0 more than 2 s after rank 1
// (which then truthfully said "1 of 3"). A rank whose deadline falls with
// the host's may instead find the store gone as it waits (the host's failed
// init closes it): that rank's status says so (a fresh-clone CI run saw it).
TEST(Rendezvous, TimeoutSaysHowManyRanksArrived) {
  auto res = run(3, "rendezvous_timeout",
                 {"DDP_TEST_TIMEOUT_MS=6000",
                  "DDP_TEST_EXPECT=2 of 3 ranks arrived|the store hosted by rank 0 closed while this rank waited"},
                 60, {2});
  expect_all_ok(res, {2});
}

TEST(Subgroups, OnePerNode) { expect_all_ok(run(4, "subgroups", {"LOCAL_WORLD_SIZE=2"})); }
TEST(Subgroups, ExplicitSize) { expect_all_ok(run(4, "subgroups", {"DDP_TEST_GROUP_SIZE=4"})); }

}  // namespace

// Rank 0 hosts the store, which holds two connections or more per rank on
// top of what rank 0 needs itself: under a soft limit on descriptors that
// leaves no room for them (1024 is usual; a job of some hundreds of ranks)
// the ranks' connections waited unaccepted and every rank timed out
// (16 and 20 here: rank 0 failed at once, the others after their 60 s;
// 24: all after 60 s). Rank 0 now raises its soft limit by what the store
// needs, within the hard limit.
TEST(StoreHost, TakesTheDescriptorsItsRanksConnectionsNeed) {
  rlimit r{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &r), 0);
  if (r.rlim_max < 256) GTEST_SKIP() << "skipped: the hard limit on descriptors is " << r.rlim_max;
  const std::string tag = unique_tag();
  // The failure took the ranks' 60 s timeout: the run's limit and the
  // bound stay below it. The reducer scenario's loops are several times
  // slower under the sanitizers: 25.8, 28.1 and 31.2 s under ASan on 2 busy
  // cores in fresh-clone CI runs (the last failed a 30 s bound), 1.4-2.8 s
  // natively.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const double bound = 50;
#else
  const double bound = 30;
#endif
  auto res = run_ranks(4, {"/bin/bash", "-c", "ulimit -Sn 16 && exec " + worker_path() + " reducer"},
                       {"DDP_TEST_TAG=" + tag}, 55);
  EXPECT_FALSE(res.timed_out) << res.summary();
  EXPECT_FALSE(ddptest::any_process_tagged(tag)) << "a worker outlived the test";
  expect_all_ok(res);
  EXPECT_LT(res.seconds, bound) << res.summary();
}
