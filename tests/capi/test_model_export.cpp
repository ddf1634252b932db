// What lets a trained model out, through the C API on one process: the
// module's state by name, TorchScript export, state dicts, learning-rate
// schedulers and checkpoints with several optimizers and schedulers. Bad
// input gets a status naming what was wrong and changes nothing. Parity of
// the values with PyTorch and Lightning: tests/parity/test_checkpoint_parity.py
// and test_lr_scheduler_parity.py.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../core/file_bytes.h"
#include "../core/file_size_limit.h"
#include "capi_test_util.h"

namespace {

std::string last() { return ddp_last_error_message(); }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The digits MLP exported into a fresh directory, or the reason it cannot be.
class Exported : public testing::Test {
 protected:
  void SetUp() override {
    const char* exporter = std::getenv("DDP_EXPORT_DIGITS");
    if (!exporter) GTEST_SKIP() << "DDP_EXPORT_DIGITS is not set: the test module cannot be exported";
    dir = testing::TempDir() + "/model_export_" + std::to_string(getpid());
    if (std::system((std::string(exporter) + " " + dir + " >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "export_digits.py could not run (scikit-learn missing?)";
    ASSERT_EQ(ddp_module_load(&m, (dir + "/mlp.pt").c_str()), DDP_OK) << last();
  }
  void TearDown() override {
    ddp_module_free(m);
    if (!dir.empty()) std::system(("rm -rf " + dir).c_str());
  }
  std::vector<float> read(const char* name) {
    ddp_tensor* t = nullptr;
    EXPECT_EQ(ddp_module_get(m, name, &t), DDP_OK) << last();
    std::vector<float> v(ddp_tensor_numel(t));
    EXPECT_EQ(ddp_tensor_copy_to(t, v.data(), v.size() * sizeof(float)), DDP_OK);
    ddp_tensor_free(t);
    return v;
  }
  std::string dir;
  ddp_module* m = nullptr;
};

TEST_F(Exported, StateByNameListsReadsAndSetsWithChecks) {
  ASSERT_EQ(ddp_module_state_count(m), 6u);
  const char* name = nullptr;
  int is_param = -1;
  ASSERT_EQ(ddp_module_state_name(m, 0, &name, &is_param), DDP_OK);
  EXPECT_STREQ(name, "fc1.weight");
  EXPECT_EQ(is_param, 1);
  ASSERT_EQ(ddp_module_state_name(m, 5, &name, nullptr), DDP_OK);
  EXPECT_STREQ(name, "fc3.bias");
  EXPECT_EQ(ddp_module_state_name(m, 6, &name, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "index 6 is past the module's 6 entries")) << last();
  EXPECT_EQ(ddp_module_state_name(m, 0, nullptr, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_module_state_count(nullptr), 0u);

  ddp_tensor* w = nullptr;
  ASSERT_EQ(ddp_module_get(m, "fc3.bias", &w), DDP_OK) << last();
  ASSERT_EQ(ddp_tensor_ndim(w), 1u);
  EXPECT_EQ(ddp_tensor_shape(w)[0], 10);
  EXPECT_EQ(ddp_tensor_dtype(w), DDP_FLOAT32);
  // It shares the module's memory.
  static_cast<float*>(ddp_tensor_data(w))[3] = 42.0f;
  EXPECT_EQ(read("fc3.bias")[3], 42.0f);
  ddp_tensor_free(w);
  EXPECT_EQ(ddp_module_get(m, "fc9.weight", &w), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "no parameter or buffer named 'fc9.weight'")) << last();
  EXPECT_EQ(w, nullptr);

  std::vector<float> ten(10, 0.5f), three(3, 0.5f);
  std::vector<double> ten_d(10, 0.5);
  int64_t s10[1] = {10}, s3[1] = {3};
  ddp_tensor *good = nullptr, *short_one = nullptr, *doubles = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&good, ten.data(), DDP_FLOAT32, s10, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&short_one, three.data(), DDP_FLOAT32, s3, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&doubles, ten_d.data(), DDP_FLOAT64, s10, 1), DDP_OK);
  EXPECT_EQ(ddp_module_set(m, "fc3.bias", short_one), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'fc3.bias' has shape [10], the value [3]")) << last();
  EXPECT_EQ(ddp_module_set(m, "fc3.bias", doubles), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'fc3.bias' is Float, the value Double")) << last();
  EXPECT_EQ(read("fc3.bias")[3], 42.0f);  // unchanged
  ASSERT_EQ(ddp_module_set(m, "fc3.bias", good), DDP_OK) << last();
  EXPECT_EQ(read("fc3.bias"), ten);
  EXPECT_EQ(ddp_module_set(m, nullptr, good), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_module_set(m, "fc3.bias", nullptr), DDP_E_INVALID_ARGUMENT);
  ddp_tensor_free(good);
  ddp_tensor_free(short_one);
  ddp_tensor_free(doubles);
}

TEST_F(Exported, SavedModulesAndStateDictsComeBackAndBadPathsAreNamed) {
  std::vector<float> ten(10, 0.25f);
  int64_t s10[1] = {10};
  ddp_tensor* v = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&v, ten.data(), DDP_FLOAT32, s10, 1), DDP_OK);
  ASSERT_EQ(ddp_module_set(m, "fc3.bias", v), DDP_OK) << last();
  ddp_tensor_free(v);
  std::string saved = dir + "/trained.pt";
  ASSERT_EQ(ddp_module_save(m, saved.c_str()), DDP_OK) << last();
  ddp_module* again = nullptr;
  ASSERT_EQ(ddp_module_load(&again, saved.c_str()), DDP_OK) << last();
  ddp_tensor* b = nullptr;
  ASSERT_EQ(ddp_module_get(again, "fc3.bias", &b), DDP_OK);
  EXPECT_EQ(static_cast<float*>(ddp_tensor_data(b))[9], 0.25f);
  ddp_tensor_free(b);
  ddp_module_free(again);
  EXPECT_EQ(ddp_module_save(m, "/nonexistent/dir/x.pt"), DDP_E_IO);
  EXPECT_TRUE(has(last(), "/nonexistent/dir/x.pt")) << last();
  EXPECT_EQ(ddp_module_save(m, nullptr), DDP_E_INVALID_ARGUMENT);

  std::string sd = dir + "/sd.pt";
  ASSERT_EQ(ddp_module_save_state_dict(m, sd.c_str()), DDP_OK) << last();
  ddp_module* fresh = nullptr;
  ASSERT_EQ(ddp_module_load(&fresh, (dir + "/mlp.pt").c_str()), DDP_OK);
  ASSERT_EQ(ddp_module_load_state_dict(fresh, sd.c_str(), 1), DDP_OK) << last();
  ASSERT_EQ(ddp_module_get(fresh, "fc3.bias", &b), DDP_OK);
  EXPECT_EQ(static_cast<float*>(ddp_tensor_data(b))[0], 0.25f);
  ddp_tensor_free(b);
  EXPECT_EQ(ddp_module_load_state_dict(fresh, (dir + "/mlp.pt").c_str(), 1), DDP_E_IO);  // a TorchScript archive
  EXPECT_TRUE(has(last(), "mlp.pt")) << last();
  EXPECT_EQ(ddp_module_load_state_dict(fresh, (dir + "/none.pt").c_str(), 0), DDP_E_IO);
  // A FIFO at once, not a wait for its writer (an alarm ends a hang).
  const std::string fifo = dir + "/sd_fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);
  EXPECT_EQ(ddp_module_load_state_dict(fresh, fifo.c_str(), 1), DDP_E_IO);
  EXPECT_TRUE(has(last(), fifo + ": not a regular file")) << last();
  alarm(0);
  ddp_module_free(fresh);
}

// A disk that fills up midway through a save (a file-size limit of half
// the module's file stands in for it): DDP_E_IO naming the path, the file
// saved before untouched, no temporary file left, and the process goes on.
// LibTorch's archive writer ended the process (std::terminate) when the
// file could not be written, for the module and for its state dict alike.
TEST_F(Exported, ASaveThatRunsOutOfRoomMidwayIsAnIoErrorAndKeepsTheOldFile) {
  const std::string module_path = dir + "/kept.pt", state_path = dir + "/kept_sd.pt";
  ASSERT_EQ(ddp_module_save(m, module_path.c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_module_save_state_dict(m, state_path.c_str()), DDP_OK) << last();
  auto bytes_of = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), {});
  };
  const std::string module_bytes = bytes_of(module_path), state_bytes = bytes_of(state_path);
  const rlim_t half = static_cast<rlim_t>(std::min(module_bytes.size(), state_bytes.size()) / 2);
  const LimitedRun run = run_with_file_size_limit(half, [&] {
    std::string report;
    for (const std::string& path : {module_path, state_path}) {
      const int rc = path == module_path ? ddp_module_save(m, path.c_str()) : ddp_module_save_state_dict(m, path.c_str());
      report += std::to_string(rc) + " " + last() + "\n";
    }
    return report;
  });
  const pid_t child = run.pid;
  const std::string& report = run.report;
  ASSERT_TRUE(run.exited) << report;
  const std::string io = std::to_string(DDP_E_IO) + " ";
  const auto newline = report.find('\n');
  const std::string module_line = report.substr(0, newline), state_line = report.substr(newline + 1);
  EXPECT_EQ(module_line.rfind(io, 0), 0u) << module_line;
  EXPECT_TRUE(has(module_line, module_path)) << module_line;
  EXPECT_EQ(state_line.rfind(io, 0), 0u) << state_line;
  EXPECT_TRUE(has(state_line, state_path)) << state_line;
  EXPECT_EQ(bytes_of(module_path), module_bytes) << "the module saved before changed";
  EXPECT_EQ(bytes_of(state_path), state_bytes) << "the state dict saved before changed";
  for (const std::string& path : {module_path, state_path})
    EXPECT_TRUE(temporaries_left(path, child).empty()) << "a temporary file was left: " << path;
  ddp_module* again = nullptr;
  ASSERT_EQ(ddp_module_load(&again, module_path.c_str()), DDP_OK) << last();
  ddp_module_free(again);
}

ddp_lr_scheduler* make(ddp_optimizer* opt, ddp_lr_scheduler_options o) {
  ddp_lr_scheduler* s = nullptr;
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, &o), DDP_OK) << last();
  return s;
}

TEST_F(Exported, SchedulersCheckTheirArgumentsAndKinds) {
  ddp_optimizer* opt = nullptr;
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.1;
  ASSERT_EQ(ddp_optimizer_new_sgd(&opt, m, &sgd), DDP_OK);
  ddp_lr_scheduler* s = nullptr;
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, nullptr), DDP_E_INVALID_ARGUMENT);
  ddp_lr_scheduler_options o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_STEP);
  o.step_size = 0;
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "step_size 0 is not positive")) << last();
  o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_STEP);
  o.kind = static_cast<ddp_lr_scheduler_kind>(99);
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "unknown kind 99")) << last();
  o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_STEP);
  o.version = 7;
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, &o), DDP_E_INVALID_ARGUMENT);
  o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_LINEAR);
  o.start_factor = 0;
  EXPECT_EQ(ddp_lr_scheduler_new(&s, opt, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  double lr = 0;
  ASSERT_EQ(ddp_optimizer_lr(opt, &lr), DDP_OK);
  EXPECT_EQ(lr, 0.1);  // no failed constructor changed it

  // A warmup's first rate, the metric-driven kind refusing a plain step.
  o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_LINEAR);
  o.start_factor = 0.25;
  ddp_lr_scheduler* warm = make(opt, o);
  ASSERT_EQ(ddp_lr_scheduler_last_lr(warm, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.025);
  EXPECT_EQ(ddp_lr_scheduler_step_metric(warm, 1.0), DDP_E_INVALID_ARGUMENT);
  ddp_lr_scheduler* plateau = make(opt, DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_REDUCE_ON_PLATEAU));
  EXPECT_EQ(ddp_lr_scheduler_step(plateau), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "needs the metric")) << last();
  EXPECT_EQ(ddp_lr_scheduler_step_metric(plateau, 1.0), DDP_OK);

  // SequentialLR: milestones, kinds and optimizers checked.
  ddp_lr_scheduler* cos = make(opt, DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_COSINE_ANNEALING));
  ddp_lr_scheduler* both[2] = {warm, plateau};
  int64_t at5 = 5;
  EXPECT_EQ(ddp_lr_scheduler_new_sequential(&s, opt, both, 2, &at5), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "cannot hold ReduceLROnPlateau")) << last();
  ddp_optimizer* other = nullptr;
  ASSERT_EQ(ddp_optimizer_new_sgd(&other, m, &sgd), DDP_OK);
  both[1] = cos;
  EXPECT_EQ(ddp_lr_scheduler_new_sequential(&s, other, both, 2, &at5), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "must share its optimizer")) << last();
  EXPECT_EQ(ddp_lr_scheduler_new_sequential(&s, opt, both, 2, nullptr), DDP_E_INVALID_ARGUMENT);
  ASSERT_EQ(ddp_lr_scheduler_new_sequential(&s, opt, both, 2, &at5), DDP_OK) << last();
  // The scheduler keeps its optimizer: freeing the handle first is fine.
  ddp_optimizer_free(opt);
  EXPECT_EQ(ddp_lr_scheduler_step(s), DDP_OK) << last();
  ddp_lr_scheduler_free(s);
  EXPECT_EQ(ddp_lr_scheduler_step(s), DDP_E_INVALID_ARGUMENT);  // freed
  ddp_lr_scheduler_free(cos);
  ddp_lr_scheduler_free(warm);
  ddp_lr_scheduler_free(plateau);
  ddp_optimizer_free(other);
}

// Any positive T_max is PyTorch's argument; the cosine's period test once
// computed 2 * T_max in int64 (undefined behaviour past 2^62, which the
// sanitizer build stops on). The rate barely moves over so long a period.
TEST_F(Exported, ACosinePeriodPast2To62StepsWithoutOverflow) {
  ddp_optimizer* opt = nullptr;
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.1;
  ASSERT_EQ(ddp_optimizer_new_sgd(&opt, m, &sgd), DDP_OK);
  ddp_lr_scheduler_options o = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_COSINE_ANNEALING);
  o.t_max = INT64_MAX;
  ddp_lr_scheduler* s = make(opt, o);
  for (int k = 0; k < 3; ++k) ASSERT_EQ(ddp_lr_scheduler_step(s), DDP_OK) << last();
  double lr = 0;
  ASSERT_EQ(ddp_lr_scheduler_last_lr(s, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.1);
  ddp_lr_scheduler_free(s);
  ddp_optimizer_free(opt);
}

TEST_F(Exported, CheckpointsCarryEveryOptimizerAndSchedulerAndRefuseAMismatch) {
  ddp_strategy* s = nullptr;
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.state_dict_prefix = "model.";
  ASSERT_EQ(ddp_strategy_new(&s, &so), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(s, m), DDP_OK) << last();
  ddp_optimizer *a = nullptr, *b = nullptr;
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  ASSERT_EQ(ddp_optimizer_new_sgd(&a, m, &sgd), DDP_OK);
  ASSERT_EQ(ddp_optimizer_new_adamw(&b, m, nullptr), DDP_OK);
  ddp_lr_scheduler_options so_step = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_STEP);
  ddp_lr_scheduler* sa = make(a, so_step);
  ddp_lr_scheduler* sb = make(b, DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_EXPONENTIAL));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(ddp_lr_scheduler_step(sa), DDP_OK);
    ASSERT_EQ(ddp_lr_scheduler_step(sb), DDP_OK);
  }
  double lr_a = 0, lr_b = 0;
  ddp_optimizer_lr(a, &lr_a);
  ddp_optimizer_lr(b, &lr_b);
  ddp_optimizer* opts[2] = {a, b};
  ddp_lr_scheduler* scheds[2] = {sa, sb};
  std::string path = dir + "/two.ckpt";
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.step = 30;
  info.epoch = 3;
  ASSERT_EQ(ddp_strategy_save_checkpoint_v2(s, path.c_str(), m, opts, 2, scheds, 2, &info), DDP_OK) << last();
  // Counters that Lightning's never are: negative, or a fit loop's batch
  // count (epoch x batches_in_epoch) past int64.
  ddp_checkpoint_info wrong = info;
  wrong.epoch = -1;
  EXPECT_EQ(ddp_strategy_save_checkpoint_v2(s, path.c_str(), m, opts, 2, scheds, 2, &wrong), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "epoch -1 is negative")) << last();
  wrong = info;
  wrong.epoch = int64_t{1} << 32;
  wrong.batches_in_epoch = int64_t{1} << 32;
  EXPECT_EQ(ddp_strategy_save_checkpoint_v2(s, path.c_str(), m, opts, 2, scheds, 2, &wrong), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "epoch 4294967296 times batches_in_epoch 4294967296")) << last();
  info.version = 9;
  EXPECT_EQ(ddp_strategy_save_checkpoint_v2(s, path.c_str(), m, opts, 2, scheds, 2, &info), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_strategy_save_checkpoint_v2(s, path.c_str(), m, nullptr, 2, scheds, 2, nullptr), DDP_E_INVALID_ARGUMENT);

  // Fresh optimizers and schedulers come back to the saved rates.
  ddp_optimizer *a2 = nullptr, *b2 = nullptr;
  ASSERT_EQ(ddp_optimizer_new_sgd(&a2, m, &sgd), DDP_OK);
  ASSERT_EQ(ddp_optimizer_new_adamw(&b2, m, nullptr), DDP_OK);
  ddp_lr_scheduler* sa2 = make(a2, so_step);
  ddp_lr_scheduler* sb2 = make(b2, DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_EXPONENTIAL));
  ddp_optimizer* opts2[2] = {a2, b2};
  ddp_lr_scheduler* scheds2[2] = {sa2, sb2};
  // The wrong number of optimizers, or their kinds swapped, change nothing.
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), m, opts2, 1, scheds2, 2, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "holds 2 optimizer states, 1 were given")) << last();
  ddp_optimizer* swapped[2] = {b2, a2};
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), m, swapped, 2, scheds2, 2, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "another optimizer")) << last();
  EXPECT_TRUE(has(last(), "load_checkpoint: " + path + ": ")) << last();
  ddp_lr_scheduler* swapped_s[2] = {sb2, sa2};
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), m, opts2, 2, swapped_s, 2, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "lacks 'step_size'")) << last();
  EXPECT_TRUE(has(last(), "load_checkpoint: " + path + ": ")) << last();
  {
    // Named even where the path is a word of the refusal: "o", relative,
    // is in "another optimizer" (a text test of the message missed it).
    char cwd[4096];
    ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
    ASSERT_EQ(chdir(dir.c_str()), 0);
    std::filesystem::copy_file("two.ckpt", "o", std::filesystem::copy_options::overwrite_existing);
    EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, "o", m, swapped, 2, scheds2, 2, nullptr, nullptr), DDP_E_IO);
    const std::string refusal = last();
    std::filesystem::remove("o");
    ASSERT_EQ(chdir(cwd), 0);
    EXPECT_TRUE(has(refusal, "load_checkpoint: o: optimizer state")) << refusal;
  }
  double lr = 0;
  ddp_optimizer_lr(a2, &lr);
  EXPECT_EQ(lr, 0.1);
  ddp_checkpoint_info back = DDP_CHECKPOINT_INFO_INIT;
  ASSERT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), m, opts2, 2, scheds2, 2, &back, nullptr), DDP_OK) << last();
  EXPECT_EQ(back.step, 30);
  EXPECT_EQ(back.epoch, 3);
  ddp_optimizer_lr(a2, &lr);
  EXPECT_EQ(lr, lr_a);
  ddp_optimizer_lr(b2, &lr);
  EXPECT_EQ(lr, lr_b);
  // Stepping on gives what the saved scheduler gives.
  ASSERT_EQ(ddp_lr_scheduler_step(sb), DDP_OK);
  ASSERT_EQ(ddp_lr_scheduler_step(sb2), DDP_OK);
  ddp_optimizer_lr(b, &lr_b);
  ddp_optimizer_lr(b2, &lr);
  EXPECT_EQ(lr, lr_b);
  // Weights only: no optimizers given.
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), m, nullptr, 0, nullptr, 0, nullptr, nullptr), DDP_OK) << last();
  // Into another model: the entry that does not fit is named with both
  // shapes, the file and the prefix its names were found under.
  std::vector<float> small(16, 1.0f);
  int64_t s44[2] = {4, 4};
  ddp_tensor* w = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&w, small.data(), DDP_FLOAT32, s44, 2), DDP_OK);
  const char* names[1] = {"fc1.weight"};
  int param[1] = {0};
  ddp_module* other = nullptr;
  ASSERT_EQ(ddp_module_from_tensors(&other, names, &w, param, 1), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, path.c_str(), other, nullptr, 0, nullptr, 0, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "module state from " + path + " (the entries under 'model.'): 'fc1.weight' was saved with "
                          "shape [128, 64] Float, the module has [4, 4] Float")) << last();
  EXPECT_EQ(small[0], 1.0f);
  ddp_module_free(other);
  ddp_tensor_free(w);
  ASSERT_EQ(ddp_strategy_save_module(s, (dir + "/exported.pt").c_str(), m), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_save_module(s, "/nonexistent/x.pt", m), DDP_E_IO);
  EXPECT_TRUE(has(last(), "save_module: global rank 0 could not save")) << last();
  for (auto* x : {sa, sb, sa2, sb2}) ddp_lr_scheduler_free(x);
  for (auto* x : {a, b, a2, b2}) ddp_optimizer_free(x);
  ddp_strategy_free(s);
}

}  // namespace
