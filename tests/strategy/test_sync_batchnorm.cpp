// sync_batchnorm on 2 and 4 real ranks (core strategy, Gloo/shm on
// loopback): see sync_batchnorm_worker.cpp for what each rank checks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../mp/launcher.h"

namespace {

std::string models_dir;  // exported once per process, removed when it exits

std::string models() {
  if (!models_dir.empty()) return models_dir;
  const char* exporter = std::getenv("DDP_EXPORT_BN");  // "<python> <export_bn_models.py>", set by CTest
  if (!exporter) return "";
  std::string d = testing::TempDir() + "/sync_bn_models_" + std::to_string(getpid());
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(testing::TempDir() + "/sync_bn_models_" + std::to_string(getpid()), ignored);
  });
  if (std::system((std::string(exporter) + " " + d + " >/dev/null 2>&1").c_str()) != 0) return "";
  return models_dir = d;
}

std::string worker() {
  std::string w = ddptest::worker_path();
  return w.substr(0, w.rfind('/')) + "/strategy/sync_batchnorm_worker";
}

void run_ok(int world, const std::string& model, const std::string& kind, int layers, bool traced = false) {
  if (models().empty()) GTEST_SKIP() << "the test models could not be exported (DDP_EXPORT_BN unset, or no torch)";
  std::vector<std::string> argv = {worker(), models() + "/" + model, kind, std::to_string(layers)};
  if (traced) argv.push_back("traced");
  auto res = ddptest::run_ranks(world, argv, {"OMP_NUM_THREADS=1"}, 180);
  ASSERT_FALSE(res.timed_out) << res.summary();
  for (auto& r : res.ranks) EXPECT_EQ(r.exit_code, 0) << res.summary();
}

class SyncBatchNorm : public ::testing::TestWithParam<int> {};
TEST_P(SyncBatchNorm, BatchNorm1dEqualsOneBatchNormOnTheWholeBatch) { run_ok(GetParam(), "bn1d.pt", "1d", 1); }
TEST_P(SyncBatchNorm, BatchNorm2dEqualsOneBatchNormOnTheWholeBatch) { run_ok(GetParam(), "bn2d.pt", "2d", 1); }
TEST_P(SyncBatchNorm, ATracedModelsBatchNormIsConvertedToo) { run_ok(GetParam(), "bn1d_traced.pt", "1d", 1, true); }
INSTANTIATE_TEST_SUITE_P(Ranks, SyncBatchNorm, ::testing::Values(2, 4));

// A rank that dies before a synchronised forward: the others get a status
// (peer failed or timeout), within the 5 s timeout, none hangs.
TEST(SyncBatchNormFailure, ADeadRankEndsTheOthersForwardWithAStatus) {
  if (models().empty()) GTEST_SKIP() << "the test models could not be exported (DDP_EXPORT_BN unset, or no torch)";
  auto res = ddptest::run_ranks(3, {worker(), models() + "/bn1d.pt", "1d", "1", "kill"}, {"OMP_NUM_THREADS=1"}, 60);
  ASSERT_FALSE(res.timed_out) << res.summary();
  EXPECT_EQ(res.ranks[1].exit_code, 7) << res.summary();
  EXPECT_EQ(res.ranks[0].exit_code, 0) << res.summary();
  EXPECT_EQ(res.ranks[2].exit_code, 0) << res.summary();
}

TEST(SyncBatchNormNoOp, AModelWithoutBatchNormTrainsUnchanged) { run_ok(2, "nobn.pt", "1d", 0); }

}  // namespace
