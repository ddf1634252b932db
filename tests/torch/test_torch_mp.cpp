// LibTorch models with ddp::DistributedDataParallel on 2 and 4 real ranks.
#include <gtest/gtest.h>

#include <csignal>

#include "../mp/launcher.h"

namespace {
std::string torch_worker() {
  std::string w = ddptest::worker_path();
  return w.substr(0, w.rfind('/')) + "/torch/torch_worker";
}

void run_ok(int world, const std::string& mode) {
  auto res = ddptest::run_ranks(world, {torch_worker(), mode}, {}, 180);
  ASSERT_FALSE(res.timed_out) << res.summary();
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
}

class TorchWorlds : public ::testing::TestWithParam<int> {};
TEST_P(TorchWorlds, AutogradHooksAverageLikePyTorch) { run_ok(GetParam(), "mlp"); }
TEST_P(TorchWorlds, UnusedParameterWithFindUnused) { run_ok(GetParam(), "unused"); }
TEST_P(TorchWorlds, Fp16HookThroughRegisterCommHook) { run_ok(GetParam(), "fp16_hook"); }
TEST_P(TorchWorlds, GradientAsBucketViewAveragesInPlace) { run_ok(GetParam(), "bucket_view"); }
TEST_P(TorchWorlds, AllGatherWithSyncGradsSumsEachSlicesGradient) { run_ok(GetParam(), "gather_grads"); }
TEST_P(TorchWorlds, SyncBatchNorm1dInATorchModelEqualsOneBatchNormOnTheWholeBatch) { run_ok(GetParam(), "sync_bn_1d"); }
TEST_P(TorchWorlds, SyncBatchNorm2dInATorchModelEqualsOneBatchNormOnTheWholeBatch) { run_ok(GetParam(), "sync_bn_2d"); }
// The last rank SIGKILLed inside a synchronised batch norm's step: every
// other rank's forward or backward ends in DDP_E_PEER_FAILED naming it, in
// seconds (checked in the worker), and exits; nothing hangs.
void run_killed(int world, const std::string& mode) {
  auto res = ddptest::run_ranks(world, {torch_worker(), mode}, {}, 120);
  ASSERT_FALSE(res.timed_out) << res.summary();
  for (int r = 0; r + 1 < world; ++r) EXPECT_EQ(res.ranks[r].exit_code, 0) << res.summary();
  EXPECT_EQ(res.ranks[world - 1].signal, SIGKILL) << res.summary();
}
TEST_P(TorchWorlds, ARankKilledInSyncBatchNormsForwardGivesTheOthersPeerFailed) {
  run_killed(GetParam(), "sync_bn_killed_in_forward");
}
TEST_P(TorchWorlds, ARankKilledBeforeSyncBatchNormsBackwardGivesTheOthersPeerFailed) {
  run_killed(GetParam(), "sync_bn_killed_in_backward");
}
INSTANTIATE_TEST_SUITE_P(Ranks, TorchWorlds, ::testing::Values(2, 4));
TEST(TorchReducer, GradientsSharingMemoryAreRefusedByName) { run_ok(2, "aliased_grads"); }
}  // namespace
