// The flight recorder (issue 27): real ranks over Gloo and shm fail on
// purpose (a stalled rank, different sizes, different ops, a fatal signal),
// and the verdict on their dumps must name the rank, the collective and what
// differed. ddprun and ddp_flight print the same verdict.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "debug/flight_analysis.h"
#include "launcher.h"

namespace fl = ddp::core::flight;

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A private directory for one test's dumps, removed afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    std::string t = testing::TempDir() + "flightXXXXXX";
    std::vector<char> b(t.begin(), t.end());
    b.push_back('\0');
    path = mkdtemp(b.data());
  }
  ~TempDir() {
    std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
  std::string sub;  // a directory under path for the dumps, where a test made one
  std::string prefix() const { return path + sub + "/rank_"; }
  int entries() const {
    int n = 0;
    if (DIR* d = opendir(path.c_str())) {
      while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  }
};

std::string hardening_worker() {
  std::string mp = ddptest::worker_path();
  return mp.substr(0, mp.rfind('/')) + "/hardening_worker";
}

ddptest::RunResult run(const std::string& scenario, const TempDir& dir, std::vector<std::string> env = {},
                       double limit = 60) {
  static int n = 0;
  std::string tag = "flight-" + std::to_string(getpid()) + "-" + std::to_string(++n);
  env.push_back("DDP_TEST_TAG=" + tag);
  env.push_back("DDP_FLIGHT_RECORDER_FILE=" + dir.prefix());
  auto res = ddptest::run_ranks(2, {hardening_worker(), scenario}, env, limit);
  EXPECT_FALSE(res.timed_out) << res.summary();
  EXPECT_FALSE(ddptest::any_process_tagged(tag)) << "a worker outlived the test";
  return res;
}

std::vector<fl::RankRecord> records(const TempDir& dir) {
  std::vector<fl::RankRecord> out;
  for (auto& f : fl::files_with_prefix(dir.prefix())) out.push_back(fl::read_record(f));
  return out;
}

std::string verdict_text(const std::vector<fl::RankRecord>& recs) {
  std::string s;
  for (auto& line : fl::verdict(recs)) s += line + "\n";
  return s;
}

const fl::Entry* entry(const fl::RankRecord& r, int64_t seq) {
  for (auto& e : r.entries)
    if (e.label == "g0" && e.seq == seq) return &e;
  return nullptr;
}

class FlightRecorder : public testing::TestWithParam<std::string> {
 protected:
  std::vector<std::string> backend() const { return {"WORKER_BACKEND=" + GetParam()}; }
};

// --- the verdict on records written by hand ----------------------------------

const char* kRecord =
    "libddp-flight-recorder 1\nrank 0\nworld 2\npid 7\nhost h\ndumped_us 5\nreason timeout: x\n"
    "# comment\n"
    "entry g0 1 all_reduce sum Float 4 [4] -1 completed 10 11 12\n"
    "entry g0 2 broadcast - Float 4 [2,2] 0 timed_out 20 21 -\nend\n";

TEST(FlightAnalysis, ParsesARecord) {
  auto r = fl::parse_record(kRecord, "r0");
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 2);
  EXPECT_EQ(r.reason, "timeout: x");
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(fl::describe(r.entries[0]), "#1 all_reduce(sum) Float[4]");
  EXPECT_EQ(fl::describe(r.entries[1]), "#2 broadcast Float[2,2] root 0");
  EXPECT_EQ(r.entries[1].finished_us, 0);
}

TEST(FlightAnalysis, RefusesDamagedRecordsNamingTheLine) {
  std::string text = kRecord;
  EXPECT_THROW(fl::parse_record(text.substr(0, text.size() - 4), "cut"), std::runtime_error);  // no "end"
  try {
    fl::parse_record("libddp-flight-recorder 1\nrank 0\nworld 1\nentry g0 x\nend\n", "bad");
    FAIL() << "a short entry was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(has(e.what(), "bad:4")) << e.what();
  }
  EXPECT_THROW(fl::parse_record("something else\n", "other"), std::runtime_error);
  EXPECT_THROW(fl::parse_record("libddp-flight-recorder 1\nrank 3\nworld 2\nend\n", "rank"), std::runtime_error);
  // A path that is a FIFO is refused at once: its read waited for a writer
  // (an alarm ends the test where it would hang).
  const std::string fifo = testing::TempDir() + "/flight_fifo_" + std::to_string(getpid());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);
  try {
    fl::read_record(fifo);
    ADD_FAILURE() << "a FIFO was read";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(has(e.what(), fifo + ": cannot be read: not a regular file")) << e.what();
  }
  alarm(0);
  std::remove(fifo.c_str());
}

TEST(FlightAnalysis, NamesTheRankBehindAndTheCallItNeverMade) {
  auto r0 = fl::parse_record(kRecord, "r0");
  auto r1 = fl::parse_record(
      "libddp-flight-recorder 1\nrank 1\nworld 2\nreason peer\n"
      "entry g0 1 all_reduce sum Float 4 [4] -1 completed 10 11 12\nend\n",
      "r1");
  std::string v = verdict_text({r0, r1});
  EXPECT_TRUE(has(v, "rank 1 is behind in group g0: its last collective is #1 all_reduce(sum) Float[4] (completed), "
                     "it never called #2 broadcast Float[2,2] root 0, which rank 0 reached (timed_out)"))
      << v;
}

TEST(FlightAnalysis, NamesTheFirstDisagreementAndTheSilentRank) {
  auto r0 = fl::parse_record(kRecord, "r0");
  auto r1 = fl::parse_record(
      "libddp-flight-recorder 1\nrank 1\nworld 3\nreason peer\n"
      "entry g0 1 all_reduce sum Float 8 [8] -1 failed 10 11 12\nend\n",
      "r1");
  std::string v = verdict_text({r0, r1});
  EXPECT_TRUE(has(v, "the ranks first disagree in group g0 at collective #1: rank 0 called all_reduce(sum) "
                     "Float[4] (completed); rank 1 called all_reduce(sum) Float[8] (failed)."))
      << v;
  EXPECT_TRUE(has(v, "rank 2 left no flight record")) << v;
}

// --- real ranks ---------------------------------------------------------------

TEST_P(FlightRecorder, AStalledRankIsNamedWithTheCollectiveItWasLateFor) {
  TempDir dir;
  auto res = run("flight_stalled_rank", dir, backend());
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  const fl::Entry* waited = entry(recs[0], 6);
  ASSERT_NE(waited, nullptr) << res.summary();
  EXPECT_EQ(waited->state, "timed_out");
  for (int s = 1; s <= 5; ++s) EXPECT_EQ(entry(recs[0], s)->state, "completed");
  EXPECT_TRUE(has(recs[0].reason, "timeout")) << recs[0].reason;
  std::string v = verdict_text(recs);
  // Rank 1 reached #6 about 2 s after rank 0 (its stall, 4 s, less the
  // time rank 0 waited), or never did.
  EXPECT_TRUE(has(v, "rank 1 called #6 all_reduce(sum) Float[4] in group g0") ||
              has(v, "rank 1 is behind in group g0: its last collective is #5"))
      << v;
  EXPECT_FALSE(has(v, "rank 0 is behind")) << v;
  EXPECT_FALSE(has(v, "disagree")) << v;
}

TEST_P(FlightRecorder, AStoppedRankIsNamedSilentWithWhatTheOthersWaitedFor) {
  TempDir dir;
  auto res = run("flight_stopped_rank", dir, backend());
  EXPECT_EQ(res.ranks[0].exit_code, 0) << res.summary();
  EXPECT_EQ(res.ranks[1].signal, SIGKILL) << res.summary();
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 1u) << res.summary();
  std::string v = verdict_text(recs);
  EXPECT_TRUE(has(v, "rank 1 left no flight record")) << v;
  EXPECT_TRUE(has(v, "rank 0 was in #7 all_reduce(sum) Float[4] of group g0 (timed_out)")) << v;
}

TEST_P(FlightRecorder, DifferentSizesAreNamedAtTheFirstCollectiveThatDiffers) {
  TempDir dir;
  auto res = run("flight_mismatched_sizes", dir, backend());
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  std::string v = verdict_text(recs);
  EXPECT_TRUE(has(v, "the ranks first disagree in group g0 at collective #6: rank 0 called all_reduce(sum) Float[4]"))
      << v;
  EXPECT_TRUE(has(v, "rank 1 called all_reduce(sum) Float[8]")) << v;
}

TEST_P(FlightRecorder, DifferentOpsAreNamed) {
  TempDir dir;
  auto res = run("flight_mismatched_ops", dir, backend());
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  std::string v = verdict_text(records(dir));
  EXPECT_TRUE(has(v, "at collective #6: rank 0 called all_reduce(sum) Float[4]")) << v;
  EXPECT_TRUE(has(v, "rank 1 called broadcast Float[4] root 0")) << v;
}

TEST_P(FlightRecorder, AFatalSignalDumpsBeforeTheProcessDies) {
  TempDir dir;
  auto res = run("flight_fatal_signal", dir, backend());
  EXPECT_EQ(res.ranks[1].signal, SIGABRT) << res.summary();
  EXPECT_EQ(res.ranks[0].exit_code, 0) << res.summary();
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  EXPECT_EQ(recs[1].reason, "fatal signal SIGABRT");
  ASSERT_EQ(recs[1].entries.size(), 5u);
  EXPECT_EQ(recs[1].entries.back().state, "completed");
  std::string v = verdict_text(recs);
  EXPECT_TRUE(has(v, "rank 1 is behind in group g0: its last collective is #5")) << v;
}

INSTANTIATE_TEST_SUITE_P(Backends, FlightRecorder, testing::Values("gloo", "shm"));

TEST(FlightRecorderOptions, SigusrDumpsOnRequestAndTheJobGoesOn) {
  TempDir dir;
  auto res = run("flight_dump_on_request", dir);
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  for (auto& r : recs) {
    EXPECT_TRUE(has(r.reason, "SIGUSR2")) << r.reason;
    ASSERT_EQ(r.entries.size(), 5u);
    for (auto& e : r.entries) EXPECT_EQ(e.state, "completed");
    // Times: enqueued <= waiting <= finished, all taken.
    for (auto& e : r.entries) {
      EXPECT_GT(e.enqueued_us, 0);
      EXPECT_LE(e.enqueued_us, e.waiting_us);
      EXPECT_LE(e.waiting_us, e.finished_us);
    }
  }
  EXPECT_TRUE(has(verdict_text(recs), "the ranks agree")) << verdict_text(recs);
}

// The dump's temporary name ("<prefix><rank>.tmp", under /tmp by default,
// where anyone may make a link) already names a link to another file: the
// dump replaces the link and leaves the file it leads to alone (a plain
// open followed the link and overwrote that file).
TEST(FlightRecorderOptions, ALinkUnderTheTemporaryNameIsNotFollowed) {
  TempDir dir;
  const std::string victim = dir.path + "/victim";
  std::ofstream(victim) << "keep me\n";
  for (int rank : {0, 1})
    ASSERT_EQ(symlink(victim.c_str(), (dir.prefix() + std::to_string(rank) + ".tmp").c_str()), 0);
  auto res = run("flight_dump_on_request", dir);
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  std::ifstream in(victim);
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(kept, "keep me\n");
  EXPECT_EQ(records(dir).size(), 2u) << res.summary();
}

// A prefix of more than 511 bytes (a deep working directory) was cut to
// 511 and the dumps written under the cut name, where no tool looks.
TEST(FlightRecorderOptions, ALongPrefixIsUsedWhole) {
  TempDir dir;
  for (char c : {'a', 'b', 'c', 'd'}) {
    dir.sub += "/" + std::string(200, c);
    ASSERT_EQ(mkdir((dir.path + dir.sub).c_str(), 0700), 0) << dir.path + dir.sub;
  }
  ASSERT_GT(dir.prefix().size(), 800u);
  auto res = run("flight_dump_on_request", dir);
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
  EXPECT_EQ(records(dir).size(), 2u) << res.summary();
}

TEST(FlightRecorderOptions, TheRingKeepsTheNewestEntries) {
  TempDir dir;
  auto res = run("flight_dump_on_request", dir, {"DDP_FLIGHT_RECORDER_ENTRIES=3", "FLIGHT_GOOD=10"});
  auto recs = records(dir);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  // 3 rounds up to 4: the last four of ten.
  ASSERT_EQ(recs[0].entries.size(), 4u);
  EXPECT_EQ(recs[0].entries.front().seq, 7);
  EXPECT_EQ(recs[0].entries.back().seq, 10);
}

TEST(FlightRecorderOptions, ZeroEntriesRecordsNothingAndExitDumpsOnRequest) {
  TempDir off;
  run("flight_stalled_rank", off, {"DDP_FLIGHT_RECORDER_ENTRIES=0", "FLIGHT_STALL_MS=2500"});
  EXPECT_EQ(off.entries(), 0);
  TempDir at_exit;
  auto res = run("flight_dump_on_request", at_exit, {"DDP_FLIGHT_RECORDER_DUMP_ON_EXIT=1"});
  auto recs = records(at_exit);
  ASSERT_EQ(recs.size(), 2u) << res.summary();
  EXPECT_TRUE(has(recs[0].reason, "process exit")) << recs[0].reason;
  EXPECT_EQ(recs[0].entries.size(), 6u);  // the barrier after the request too
}

TEST(FlightRecorderTools, DdprunAndDdpFlightPrintTheVerdict) {
  TempDir tmp;  // ddprun's private directory goes here, and must go away
  std::string tag = "flight-ddprun-" + std::to_string(getpid());
  auto res = ddptest::run_program({DDPRUN_PATH, "--standalone", "--nproc-per-node", "2", hardening_worker(),
                                   "flight_mismatched_sizes"},
                                  {"TMPDIR=" + tmp.path, "DDP_TEST_TAG=" + tag, "FLIGHT_FAIL_JOB=1"}, 90);
  std::string out = res.ranks[0].output;
  EXPECT_NE(res.ranks[0].exit_code, 0) << out;
  EXPECT_TRUE(has(out, "ddprun: flight recorder, from 2 rank(s) of this node:")) << out;
  EXPECT_TRUE(has(out, "first disagree in group g0 at collective #6")) << out;
  EXPECT_EQ(tmp.entries(), 0) << "ddprun left its flight directory behind";

  TempDir dir;
  run("flight_mismatched_sizes", dir);
  auto tool = ddptest::run_program({DDP_FLIGHT_PATH, "--prefix", dir.prefix()}, {}, 30);
  EXPECT_EQ(tool.ranks[0].exit_code, 0) << tool.ranks[0].output;
  EXPECT_TRUE(has(tool.ranks[0].output, "first disagree in group g0 at collective #6")) << tool.ranks[0].output;
  TempDir empty;
  auto none = ddptest::run_program({DDP_FLIGHT_PATH, "--prefix", empty.prefix()}, {}, 30);
  EXPECT_EQ(none.ranks[0].exit_code, 2) << none.ranks[0].output;
}

}  // namespace
