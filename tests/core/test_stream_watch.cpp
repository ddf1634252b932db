// StreamWatch: collectives nobody waits for on the host (a CUDA step's
// bucket all-reduces) are still watched. Run here on real Gloo ranks, where
// the watchdog's part can be checked without a GPU: completion, a stalled
// peer (Timeout on the rank that waited, published to the other) and a
// killed one.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "../mp/launcher.h"

namespace {

std::string worker() {
  std::string w = ddptest::worker_path();
  return w.substr(0, w.rfind('/')) + "/stream_watch_worker";
}

double after(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("after=([0-9.]+)")) ? std::stod(m[1]) : -1;
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(StreamWatch, WatchedCollectivesFinishAndAreDropped) {
  auto r = ddptest::run_ranks(3, {worker(), "completes"}, {}, 60);
  ASSERT_FALSE(r.timed_out) << r.summary();
  for (auto& rank : r.ranks) {
    EXPECT_EQ(rank.exit_code, 0) << rank.output;
    EXPECT_TRUE(has(rank.output, "in_flight=0 right=1")) << rank.output;
    EXPECT_TRUE(has(rank.output, "status=none")) << rank.output;
  }
}

TEST(StreamWatch, AStalledPeerIsATimeoutWithinTheGroupTimeoutAndIsPublished) {
  auto r = ddptest::run_ranks(2, {worker(), "stalled"}, {}, 60);
  ASSERT_FALSE(r.timed_out) << r.summary();
  EXPECT_TRUE(has(r.ranks[0].output, "status=Timeout")) << r.ranks[0].output;
  EXPECT_TRUE(has(r.ranks[0].output, "while the device waited")) << r.ranks[0].output;
  double t = after(r.ranks[0].output);
  EXPECT_GE(t, 1.4) << r.ranks[0].output;  // the group's timeout is 1.5 s
  EXPECT_LT(t, 3.5) << r.ranks[0].output;
  // The rank that stalled learns of it from the store, with its status.
  EXPECT_TRUE(has(r.ranks[1].output, "status=Timeout")) << r.ranks[1].output;
  EXPECT_TRUE(has(r.ranks[1].output, "another rank failed")) << r.ranks[1].output;
}

TEST(StreamWatch, AKilledPeerIsReportedWithinTheTimeout) {
  auto r = ddptest::run_ranks(2, {worker(), "killed"}, {}, 60);
  ASSERT_FALSE(r.timed_out) << r.summary();
  EXPECT_EQ(r.ranks[1].signal, 9);
  EXPECT_TRUE(has(r.ranks[0].output, "status=PeerFailed") || has(r.ranks[0].output, "status=Timeout"))
      << r.ranks[0].output;
  double t = after(r.ranks[0].output);
  EXPECT_GE(t, 0) << r.ranks[0].output;
  EXPECT_LT(t, 3.5) << r.ranks[0].output;
}

}  // namespace
