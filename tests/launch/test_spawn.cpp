// ddp_spawn from a C program: popen and fork, results, failures, timeouts,
// and never a process left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "../mp/launcher.h"

namespace {

std::string spawn_prog() {
  std::string w = ddptest::worker_path();
  return w.substr(0, w.rfind('/')) + "/launch/spawn_prog";
}

struct Outcome {
  ddptest::RankResult r;
  double seconds;
};

Outcome run(std::vector<std::string> args, double limit = 60) {
  static int n = 0;
  std::string tag = "spawn-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  args.insert(args.begin(), spawn_prog());
  auto res = ddptest::run_program(args, {"DDP_TEST_TAG=" + tag}, limit);
  EXPECT_FALSE(res.timed_out) << res.summary();
  EXPECT_FALSE(ddptest::any_process_tagged(tag)) << "a worker outlived ddp_spawn";
  return {res.ranks[0], res.seconds};
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Spawn, PopenReturnsRankZerosResult) {
  for (const char* n : {"2", "4"}) {
    auto o = run({"ok", "popen", n});
    EXPECT_EQ(o.r.exit_code, 0) << o.r.output;
    std::string want = std::string("result=hello sum=") + (n[0] == '2' ? "1" : "6") + " world=" + n;
    EXPECT_TRUE(has(o.r.output, want)) << o.r.output;
  }
}

// The argument is handed to the workers in a file of the call's own
// directory: where it cannot be written (a file-size limit of 0 stands in
// for a full disk), the call is DDP_E_IO naming the file, and neither the
// half-written file nor the directory is left behind.
TEST(Spawn, AnArgumentThatCannotBeWrittenIsAnIoErrorAndLeavesNoDirectory) {
  const std::string tag = "spawn-" + std::to_string(getpid()) + "-full";
  const std::string tmpdir = testing::TempDir() + "spawn_tmpdir_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(tmpdir.c_str(), 0700), 0);
  auto res = ddptest::run_program({"/bin/bash", "-c", "trap '' XFSZ; ulimit -f 0; exec " + spawn_prog() + " ok popen 2"},
                                  {"DDP_TEST_TAG=" + tag, "TMPDIR=" + tmpdir}, 60);
  ASSERT_FALSE(res.timed_out) << res.summary();
  const std::string out = res.ranks[0].output;
  EXPECT_NE(res.ranks[0].exit_code, 0) << out;
  EXPECT_TRUE(has(out, "status=i/o error")) << out;
  const auto at = out.find("cannot write " + tmpdir + "/ddp-spawn-");  // under TMPDIR
  ASSERT_NE(at, std::string::npos) << out;
  const std::string file = out.substr(at + 13, out.find(':', at) - at - 13);
  const std::string dir = file.substr(0, file.rfind('/'));
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " was left behind";
  EXPECT_FALSE(ddptest::any_process_tagged(tag));
  EXPECT_EQ(rmdir(tmpdir.c_str()), 0) << "TMPDIR is not empty";
}

// SIGCHLD ignored on entry (a parent set SIG_IGN, which exec keeps): the
// kernel reaped each worker as it ended and waitpid never saw it, so the
// call waited for good. It now sees every end, and the program's
// disposition is back after the call.
TEST(Spawn, WorkersEndingUnderAnIgnoredSigchldAreSeen) {
  for (const char* method : {"popen", "fork"}) {
    static int n = 0;
    const std::string tag = "spawn-" + std::to_string(getpid()) + "-chld" + std::to_string(++n);
    auto res = ddptest::run_program({"/bin/bash", "-c", "trap '' CHLD; exec " + spawn_prog() + " ok " + method + " 2"},
                                    {"DDP_TEST_TAG=" + tag}, 30);
    ASSERT_FALSE(res.timed_out) << method << ": " << res.summary();
    EXPECT_EQ(res.ranks[0].exit_code, 0) << res.ranks[0].output;
    EXPECT_TRUE(has(res.ranks[0].output, "result=hello sum=1 world=2")) << res.ranks[0].output;
    EXPECT_TRUE(has(res.ranks[0].output, "sigchld after the call: ignored")) << res.ranks[0].output;
    EXPECT_FALSE(ddptest::any_process_tagged(tag));
  }
}

// Under an ignored SIGCHLD the program's own children are reaped by the
// kernel: one that ends while the call holds SIGCHLD at its default action
// must not be left a zombie, which nothing in such a program would wait for.
TEST(Spawn, AProgramsOwnChildEndingUnderTheCallIsNotLeftAZombie) {
  for (const char* method : {"popen", "fork"}) {
    static int n = 0;
    const std::string tag = "spawn-" + std::to_string(getpid()) + "-own" + std::to_string(++n);
    auto res = ddptest::run_program({"/bin/bash", "-c", "trap '' CHLD; exec " + spawn_prog() + " own_child " + method},
                                    {"DDP_TEST_TAG=" + tag}, 30);
    ASSERT_FALSE(res.timed_out) << method << ": " << res.summary();
    const std::string& out = res.ranks[0].output;
    EXPECT_EQ(res.ranks[0].exit_code, 0) << out;
    EXPECT_TRUE(has(out, "own child: ended while sigchld had its default action")) << method << ": " << out;
    EXPECT_TRUE(has(out, "own child after the call: reaped")) << method << ": " << out;
    EXPECT_FALSE(ddptest::any_process_tagged(tag));
  }
}

// A handler of the program's that reaps every child takes the workers'
// statuses: the call ends, saying so, where it waited for good.
TEST(Spawn, AProgramsHandlerThatReapsEveryChildEndsTheCallWithWhatHappened) {
  auto o = run({"sigchld_reaper"}, 30);
  EXPECT_EQ(o.r.exit_code, 1) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "status=worker failed")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "another waiter took")) << o.r.output;
}

// A worker's environment names the job it belongs to, and whatever the
// worker starts inherits it. A libddp program that a worker runs (a
// helper, an evaluation job) took itself for a worker of the outer job: it
// ran the outer body with the outer job's rank, port and files ("port ...
// is already in use") and never ran its own job.
TEST(Spawn, AProgramThatAWorkerRunsStartsAJobOfItsOwn) {
  auto o = run({"nested_program"});
  EXPECT_EQ(o.r.exit_code, 0) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "nested program said [status=ok|result=hello sum=1 world=2|]")) << o.r.output;
}

// Variables that look like a worker's, left in the environment by another
// job (or set by hand), make no worker of a process that no ddp_spawn
// started: without DDP_SPAWN_PARENT the program crashed reading RANK.
TEST(Spawn, AStrayWorkerMarkerInTheEnvironmentIsIgnored) {
  for (const std::vector<std::string>& env : std::vector<std::vector<std::string>>{
           {"DDP_SPAWN_CALL=0"}, {"DDP_SPAWN_CALL=0", "DDP_SPAWN_PARENT=1", "RANK=1"}}) {
    static int n = 0;
    const std::string tag = "spawn-" + std::to_string(getpid()) + "-stray" + std::to_string(++n);
    std::vector<std::string> with_tag = env;
    with_tag.push_back("DDP_TEST_TAG=" + tag);
    auto res = ddptest::run_program({spawn_prog(), "ok", "popen", "2"}, with_tag, 30);
    ASSERT_FALSE(res.timed_out) << res.summary();
    EXPECT_EQ(res.ranks[0].exit_code, 0) << env.back() << ": " << res.ranks[0].output;
    EXPECT_TRUE(has(res.ranks[0].output, "result=hello sum=1 world=2")) << env.back() << ": " << res.ranks[0].output;
    EXPECT_FALSE(ddptest::any_process_tagged(tag));
  }
}

// ddp_spawn from inside a worker body: with fork it is a job of its own;
// with popen its workers would run main again, which never reaches the
// call, so it is refused by name (it "succeeded" with no result, running
// nothing, where the outer job used fork).
TEST(Spawn, ASpawnInsideAWorkerIsAJobOfItsOwnOrRefusedByName) {
  for (const char* outer : {"popen", "fork"}) {
    auto forked = run({"nested_call", outer, "fork"});
    EXPECT_EQ(forked.r.exit_code, 0) << outer << ": " << forked.r.output;
    EXPECT_TRUE(has(forked.r.output, "inner status=ok [] result=[inner sum=1 world=2]")) << outer << ": " << forked.r.output;
    auto popen = run({"nested_call", outer, "popen"});
    EXPECT_EQ(popen.r.exit_code, 0) << outer << ": " << popen.r.output;
    EXPECT_TRUE(has(popen.r.output, "inner status=invalid state [ddp_spawn inside a worker of ddp_spawn: with "
                                    "DDP_START_POPEN"))
        << outer << ": " << popen.r.output;
  }
}

// A worker reads its rank from the variables its launch set; a program
// that removed one before its ddp_spawn call gets a message naming it.
TEST(Spawn, AWorkerWhoseRankVariableIsGoneFailsNamingIt) {
  auto o = run({"unset_rank"});
  EXPECT_EQ(o.r.exit_code, 1) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "status=worker failed")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "ddp_spawn worker: RANK is not set")) << o.r.output;
}

// A popen worker runs main again, so it starts where main started: a
// program that changed directory before starting its ranks (an output
// directory, as Hydra makes; an interpreter's script given by a relative
// path) had its workers start in the new one, where main's relative paths
// no longer held ("can't open file" for a Python script).
TEST(Spawn, PopenWorkersStartWhereTheProgramStarted) {
  const std::string top = testing::TempDir() + "spawn_cwd_" + std::to_string(getpid());
  ASSERT_EQ(mkdir(top.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((top + "/sub").c_str(), 0700), 0);
  char real[4096];
  ASSERT_NE(realpath((top + "/sub").c_str(), real), nullptr);
  for (const char* launcher : {"spawn", "strategy"}) {
    static int n = 0;
    const std::string tag = "spawn-" + std::to_string(getpid()) + "-cwd" + std::to_string(++n);
    auto res = ddptest::run_program({"/bin/bash", "-c", "cd '" + top + "' && exec " + spawn_prog() + " chdir_first sub " + launcher},
                                    {"DDP_TEST_TAG=" + tag}, 60);
    ASSERT_FALSE(res.timed_out) << launcher << ": " << res.summary();
    const std::string& out = res.ranks[0].output;
    EXPECT_EQ(res.ranks[0].exit_code, 0) << launcher << ": " << out;
    for (const char* rank : {"0", "1"})
      EXPECT_TRUE(has(out, std::string("rank ") + rank + " cwd=" + real + "\n")) << launcher << ": " << out;
    EXPECT_FALSE(ddptest::any_process_tagged(tag));
  }
  EXPECT_EQ(rmdir((top + "/sub").c_str()), 0);
  EXPECT_EQ(rmdir(top.c_str()), 0);
}

// A popen worker whose main ends before the call (a Python script read
// from standard input, an interpreter's prompt) ran nothing: the job
// "succeeded" with no result. Its exit code 0 is now a failure that says
// why, and the other workers are stopped rather than left to wait for it.
TEST(Spawn, APopenWorkerWhoseMainEndsBeforeTheCallFailsTheJobSayingWhy) {
  auto o = run({"main_ends_early"}, 30);
  EXPECT_EQ(o.r.exit_code, 1) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "status=worker failed")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "exit code 0 without reaching the work it was started for")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "its main ended before this ddp_spawn call")) << o.r.output;
  EXPECT_FALSE(has(o.r.output, "result=")) << o.r.output;
}

// Workers read /dev/null, as Python's multiprocessing gives its workers:
// the program's input is the program's (a worker took part of it).
TEST(Spawn, WorkersReadNothingOfTheProgramsInput) {
  for (const char* method : {"popen", "fork"}) {
    static int n = 0;
    const std::string tag = "spawn-" + std::to_string(getpid()) + "-stdin" + std::to_string(++n);
    auto res = ddptest::run_program({"/bin/bash", "-c", "head -c 100000 /dev/zero | " + spawn_prog() + " read_stdin " + method},
                                    {"DDP_TEST_TAG=" + tag}, 30);
    ASSERT_FALSE(res.timed_out) << method << ": " << res.summary();
    const std::string& out = res.ranks[0].output;
    EXPECT_EQ(res.ranks[0].exit_code, 0) << method << ": " << out;
    EXPECT_TRUE(has(out, "rank 0 read 0 bytes of stdin")) << method << ": " << out;
    EXPECT_TRUE(has(out, "rank 1 read 0 bytes of stdin")) << method << ": " << out;
    EXPECT_FALSE(ddptest::any_process_tagged(tag));
  }
}

// The strategy's popen launcher: a rank it started that ends before the
// group is made (its program failed before its setup, or never reached it)
// will never arrive; rank 0 waited for it in the rendezvous for the whole
// timeout (30 minutes by default, past the test's 60 s). Now rank 0's
// setup ends at once with DDP_E_PEER_FAILED naming the rank and its end.
TEST(StrategyPopen, ARankThatEndsBeforeTheGroupIsMadeEndsRankZerosWaitAtOnce) {
  for (const char* code : {"3", "0"}) {
    auto o = run({"strategy_child_ends_early", code}, 60);
    EXPECT_EQ(o.r.exit_code, 1) << o.r.output;
    EXPECT_TRUE(has(o.r.output, "strategy: peer failed: rendezvous at ")) << o.r.output;
    EXPECT_TRUE(has(o.r.output, std::string("rank 1 (pid ")) &&
                has(o.r.output, std::string("which this process started, ended with exit code ") + code +
                                    " before the group was made"))
        << o.r.output;
    EXPECT_LT(o.seconds, 20) << o.r.output;
  }
}

TEST(Spawn, ForkReturnsRankZerosResult) {
  auto o = run({"ok", "fork", "4"});
  EXPECT_EQ(o.r.exit_code, 0) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "result=hello sum=6 world=4")) << o.r.output;
}

TEST(Spawn, TwoCallsInOneProgram) {
  auto o = run({"twice", "2"});
  EXPECT_EQ(o.r.exit_code, 0) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "result=first sum=1 world=2")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "result=second sum=1 world=2")) << o.r.output;
}

TEST(Spawn, ErrorOnRankZeroOnlyEndsEveryRankAndNamesTheRootCause) {
  auto o = run({"fail_rank0", "3"});
  EXPECT_EQ(o.r.exit_code, 1) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "status=worker failed")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "root cause: rank 0")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "exit code 7 [first failure]")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "rank 2")) << o.r.output;
  EXPECT_LT(o.seconds, 20) << "the others must be stopped, not left to their 600 s timeout";
}

TEST(Spawn, KilledWorkerIsReportedWithItsSignal) {
  auto o = run({"kill_rank1", "3"});
  EXPECT_TRUE(has(o.r.output, "root cause: rank 1")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "signal 9 (SIGKILL) [first failure]")) << o.r.output;
  EXPECT_LT(o.seconds, 20);
}

TEST(Spawn, ForkIsRefusedOnceThreadsExist) {
  auto o = run({"fork_threads"});
  EXPECT_TRUE(has(o.r.output, "status=invalid state")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, "DDP_START_POPEN")) << o.r.output;
}

TEST(Spawn, JobTimeoutStopsEveryWorker) {
  auto o = run({"timeout"});
  EXPECT_TRUE(has(o.r.output, "status=timeout")) << o.r.output;
  EXPECT_LT(o.seconds, 15);
}

TEST(Spawn, TimeoutsPastTheLongestAreRefusedAndTheLongestWorks) {
  auto o = run({"long_timeouts"});
  const std::string& out = o.r.output;
  EXPECT_TRUE(has(out, "timeout 9223372036854775807 ms is outside [0, 3000000000000]")) << out;
  EXPECT_TRUE(has(out, "grace 9223372036854775807 ms is outside [0, 2147483647]")) << out;
  EXPECT_TRUE(has(out, "result=hello sum=1 world=2")) << out;
  EXPECT_EQ(o.r.exit_code, 1) << out;  // refused twice, then ok
}

TEST(Spawn, MasterPortInUseIsAClearError) {
  int port = 0;
  int fd = ddptest::occupy_port(&port);
  auto o = run({"port", std::to_string(port)});
  close(fd);
  EXPECT_TRUE(has(o.r.output, "status=i/o error")) << o.r.output;
  EXPECT_TRUE(has(o.r.output, std::to_string(port) + " is already in use")) << o.r.output;
  // And an explicit free port works.
  auto ok = run({"port", std::to_string(ddptest::free_port())});
  EXPECT_TRUE(has(ok.r.output, "status=ok")) << ok.r.output;
}

}  // namespace
