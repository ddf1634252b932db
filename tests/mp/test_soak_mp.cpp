// Soaks of the training path (issue 27): 1,000 reducer steps on 4 real ranks
// under every comm hook, with random bucket caps, unused parameters and
// no_sync windows, each synchronised step checked against the all-reduce
// average (mp_worker's soak_reducer); fd, thread and RSS growth bounded.
#include <gtest/gtest.h>

#include <string>

#include "launcher.h"

namespace {

class Soak : public testing::TestWithParam<std::string> {};

TEST_P(Soak, ThousandReducerStepsMatchTheAllReduceAverage) {
  std::string tag = "soak-" + std::to_string(getpid()) + "-" + GetParam();
  auto res = ddptest::run_ranks(4, {ddptest::worker_path(), "soak_reducer"},
                                {"SOAK_HOOK=" + GetParam(), "DDP_TEST_TAG=" + tag}, 280);
  EXPECT_FALSE(res.timed_out) << res.summary();
  for (size_t r = 0; r < res.ranks.size(); ++r)
    EXPECT_EQ(res.ranks[r].exit_code, 0) << "rank " << r << "\n" << res.summary();
  std::printf("%s", res.ranks[0].output.c_str());
  EXPECT_NE(res.ranks[0].output.find("1000 steps on 4 ranks"), std::string::npos) << res.summary();
}

INSTANTIATE_TEST_SUITE_P(Hooks, Soak,
                         testing::Values("allreduce", "fp16", "bf16", "custom", "wrap_fp16_custom", "post_localsgd",
                                         "powersgd", "batched_powersgd"));

TEST(Soak, HundredStrategyLifecyclesInOneProcessLeakNothing) {
  std::string tag = "lifecycles-" + std::to_string(getpid());
  auto res = ddptest::run_ranks(2, {ddptest::worker_path(), "strategy_lifecycles"}, {"DDP_TEST_TAG=" + tag}, 280);
  EXPECT_FALSE(res.timed_out) << res.summary();
  for (size_t r = 0; r < res.ranks.size(); ++r)
    EXPECT_EQ(res.ranks[r].exit_code, 0) << "rank " << r << "\n" << res.summary();
  std::printf("%s", res.ranks[0].output.c_str());
  EXPECT_NE(res.ranks[0].output.find("100 cycles"), std::string::npos) << res.summary();
}

}  // namespace
