// The strategy, modules, optimizers and losses through the C API, on one
// process: bad input and calls out of order get a status naming what was
// wrong. Training on real ranks: tests/strategy/test_digits_job.sh.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include <dirent.h>
#include <unistd.h>

#include <algorithm>

#include <cmath>
#include <map>
#include <sys/stat.h>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <chrono>
#include <string>

#include "capi_test_util.h"

namespace {

std::string last() { return ddp_last_error_message(); }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// The digits MLP exported (DDP_EXPORT_DIGITS) into a new directory named
// for `what`; "" with *why set when it cannot be (the test then skips).
std::string export_digits(const std::string& what, std::string* why) {
  const char* exporter = std::getenv("DDP_EXPORT_DIGITS");
  if (!exporter) {
    *why = "DDP_EXPORT_DIGITS is not set: the test module cannot be exported";
    return "";
  }
  std::string dir = testing::TempDir() + "/" + what + "_" + std::to_string(getpid());
  if (std::system((std::string(exporter) + " " + dir + " >/dev/null 2>&1").c_str()) != 0) {
    *why = "export_digits.py could not run (scikit-learn missing?)";
    return "";
  }
  return dir;
}

// The Python that DDP_EXPORT_DIGITS runs ("<python> <export_digits.py>"),
// for a test that edits a saved file with torch.
std::string exporter_python() {
  const std::string exporter = std::getenv("DDP_EXPORT_DIGITS");
  return exporter.substr(0, exporter.find(' '));
}

// A one-rank strategy set up with the digits MLP from `data`.
void start_with_mlp(const std::string& data, ddp_strategy** s, ddp_module** m) {
  ASSERT_EQ(ddp_strategy_new(s, nullptr), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_environment(*s), DDP_OK) << last();
  ASSERT_EQ(ddp_module_load(m, (data + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(*s, *m), DDP_OK) << last();
}


TEST(Strategy, ModulesThatCannotBeLoadedAreIoErrorsNamingThePath) {
  ddp_module* m = reinterpret_cast<ddp_module*>(0x10);
  EXPECT_EQ(ddp_module_load(&m, "/nonexistent/mlp.pt"), DDP_E_IO);
  EXPECT_EQ(m, nullptr);
  EXPECT_TRUE(has(last(), "/nonexistent/mlp.pt")) << last();
  std::string junk = testing::TempDir() + "/not_a_module.pt";
  std::ofstream(junk) << "not a TorchScript archive";
  EXPECT_EQ(ddp_module_load(&m, junk.c_str()), DDP_E_IO);
  EXPECT_TRUE(has(last(), "not a loadable TorchScript file")) << last();
  EXPECT_EQ(ddp_module_load(&m, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_module_num_parameters(nullptr), 0u);
  std::remove(junk.c_str());
  // A FIFO is refused at once: LibTorch's own open waited for a writer for
  // good (an alarm ends the test where it would hang).
  const std::string fifo = testing::TempDir() + "/module_fifo_" + std::to_string(getpid());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);
  EXPECT_EQ(ddp_module_load(&m, fifo.c_str()), DDP_E_IO);
  EXPECT_TRUE(has(last(), "module " + fifo + ": not a regular file")) << last();
  alarm(0);
  std::remove(fifo.c_str());
}

// A module that refuses its input (here: the digits MLP, which takes 64
// features, given 5) is DDP_E_INVALID_ARGUMENT naming the reason. The module
// comes from examples/digits/export_digits.py, when its Python can run.
TEST(Strategy, AModuleRefusingItsInputIsAnInvalidArgument) {
  const char* exporter = std::getenv("DDP_EXPORT_DIGITS");  // "<python> <export_digits.py>", set by CTest
  if (!exporter) GTEST_SKIP() << "DDP_EXPORT_DIGITS is not set: the test module cannot be exported";
  std::string dir = testing::TempDir() + "/strategy_module_" + std::to_string(getpid());
  std::string cmd = std::string(exporter) + " " + dir + " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "export_digits.py could not run (scikit-learn missing?)";
  ddp_module* m = nullptr;
  ASSERT_EQ(ddp_module_load(&m, (dir + "/mlp.pt").c_str()), DDP_OK) << last();
  EXPECT_EQ(ddp_module_num_parameters(m), 6u);
  float x[10] = {0};
  int64_t shape[2] = {2, 5};
  ddp_tensor *t = nullptr, *out = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, shape, 2), DDP_OK);
  EXPECT_EQ(ddp_module_forward(m, t, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "mat1 and mat2 shapes cannot be multiplied")) << last();
  EXPECT_EQ(out, nullptr);
  ddp_tensor_free(t);
  ddp_module_free(m);
  std::system(("rm -rf " + dir).c_str());
}

// A TorchScript archive that is a sound zip but whose contents are damaged
// (a byte of its code changed, with the zip's CRCs mended) is an I/O error
// naming the path, as a file that is no archive is: TorchScript's compiler
// and its unpickler throw their own exception types there, not c10::Error,
// and were DDP_E_BACKEND with no path. The damages were found by loading
// 5,010 randomly damaged copies of a saved module.
TEST(Strategy, ADamagedModuleArchiveIsAnIoErrorNamingThePath) {
  std::string why;
  const std::string dir = export_digits("damaged_module", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  const std::string python = exporter_python();
  // Rewrites the archive with one replacement in its code/__torch__.py,
  // every entry compressed as it was (zipfile writes each CRC anew).
  const std::string rewrite = R"(import sys, zipfile
src, dst, old, new = sys.argv[1:]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
    for info in zin.infolist():
        data = zin.read(info)
        if info.filename.endswith("/code/__torch__.py"):
            assert old.encode() in data, old
            data = data.replace(old.encode(), new.encode(), 1)
        zout.writestr(info, data, compress_type=info.compress_type))";
  std::ofstream(dir + "/rewrite.py") << rewrite;
  struct Damage {
    const char *old_text, *new_text, *names;  // what the message passes on from LibTorch
  };
  const Damage damages[] = {
      {"x", "x", nullptr},  // the rewrite alone: still loads
      {"class MLP(Module):", "class MLP(Module)$", "expected a valid token"},  // the compiler's ErrorReport
      {"class MLP(", "class MLQ(", "Unknown type name"},
      {"fc3 = self.fc3", "fc3 = self.fc4", "has no attribute or method 'fc4'"},
      {"  training : bool", "  trainiug : bool", "not in the map"},  // std::out_of_range from the unpickler
  };
  for (size_t i = 0; i < sizeof damages / sizeof damages[0]; ++i) {
    const Damage& d = damages[i];
    const std::string path = dir + "/damaged_" + std::to_string(i) + ".pt";
    const std::string cmd = python + " " + dir + "/rewrite.py " + dir + "/mlp.pt " + path + " '" + d.old_text +
                            "' '" + d.new_text + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    ddp_module* m = reinterpret_cast<ddp_module*>(0x10);
    if (!d.names) {
      EXPECT_EQ(ddp_module_load(&m, path.c_str()), DDP_OK) << last();
      ddp_module_free(m);
      continue;
    }
    EXPECT_EQ(ddp_module_load(&m, path.c_str()), DDP_E_IO) << d.new_text << ": " << last();
    EXPECT_EQ(m, nullptr);
    EXPECT_TRUE(has(last(), path + ": not a loadable TorchScript file")) << last();
    EXPECT_TRUE(has(last(), d.names)) << last();
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST(Strategy, OptionsAreCheckedByName) {
  ddp_strategy* s = nullptr;
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.version = 99;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "version")) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.kind = static_cast<ddp_strategy_kind>(7);
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "kind")) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.model_averaging_period = -1;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "model_averaging_period")) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.devices = -1;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "devices -1")) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.precision = "fp8-mixed";
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "precision 'fp8-mixed'") && has(last(), "bf16-mixed")) << last();
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
    o.gradient_clip_val = bad;
    EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_TRUE(has(last(), "gradient_clip_val")) << last();
  }
  // Bucket caps that are no size: NaN and 0 were refused only at
  // setup_module, infinity and 1e300 taken (their bytes undefined).
  for (double bad : {0.0, -1.0, std::nan(""), HUGE_VAL, 1e300}) {
    for (int first : {0, 1}) {
      o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
      (first ? o.first_bucket_mb : o.bucket_cap_mb) = bad;
      EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT) << bad;
      EXPECT_TRUE(has(last(), first ? "first_bucket_mb" : "bucket_cap_mb") && has(last(), "not a size in MiB"))
          << last();
    }
  }
  // A timeout past the groups' maximum, refused at setup_environment before.
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.timeout_ms = INT64_MAX;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "exceeds the maximum")) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.gradient_clip_val = 1.0;
  o.gradient_clip_algorithm = static_cast<ddp_clip_algorithm>(5);
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "gradient_clip_algorithm")) << last();
  // Lightning's rule for fp16 AMP on the CPU: bf16-mixed, with its warning.
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.precision = "16-mixed";
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  EXPECT_STREQ(ddp_strategy_precision(s), "bf16-mixed");
  EXPECT_TRUE(has(ddp_strategy_precision_warning(s), "not supported on the CPU")) << ddp_strategy_precision_warning(s);
  ddp_strategy_free(s);
  o.precision = "bf16-true";
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  EXPECT_STREQ(ddp_strategy_precision(s), "bf16-true");
  EXPECT_STREQ(ddp_strategy_precision_warning(s), "");
  ddp_strategy_free(s);
  s = nullptr;
  EXPECT_STREQ(ddp_strategy_precision(s), "");
  // Half-filled callback tables are named.
  ddp_checkpoint_io io = {nullptr, nullptr, nullptr, nullptr};
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.checkpoint_io = &io;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "checkpoint_io's save callback is NULL")) << last();
  ddp_env* env = nullptr;
  ASSERT_EQ(ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", 0), DDP_OK) << last();
  ddp_cluster_callbacks cb = {};
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.cluster_environment = env;
  o.cluster_callbacks = &cb;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "both set")) << last();
  ddp_env_free(env);
  o.cluster_callbacks = nullptr;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);  // freed
  EXPECT_TRUE(has(last(), "cluster_environment")) << last();
  // Lightning's rule: the post-local SGD hook needs model_averaging_period.
  ddp_comm_hook* localsgd = nullptr;
  ASSERT_EQ(ddp_comm_hook_post_localsgd(&localsgd, nullptr, 8, 1), DDP_OK) << last();
  ddp_comm_hook* wrapped = nullptr;
  ASSERT_EQ(ddp_comm_hook_wrap_fp16(&wrapped, localsgd), DDP_OK) << last();
  for (ddp_comm_hook* hook : {localsgd, wrapped}) {
    o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
    o.comm_hook = hook;
    EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_E_INVALID_ARGUMENT);
    EXPECT_TRUE(has(last(), "model_averaging_period is required")) << last();
    o.model_averaging_period = 4;
    ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
    ddp_strategy_free(s);
    s = nullptr;
  }
  ddp_comm_hook_free(wrapped);
  ddp_comm_hook_free(localsgd);
  EXPECT_EQ(s, nullptr);
  EXPECT_EQ(ddp_strategy_options_init(&o, DDP_STRATEGY_OPTIONS_VERSION + 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_strategy_options_init(&o, DDP_STRATEGY_OPTIONS_VERSION), DDP_OK);
  EXPECT_EQ(o.broadcast_buffers, 1);
  EXPECT_EQ(o.bucket_cap_mb, 25.0);
  EXPECT_EQ(o.gradient_as_bucket_view, 0);
  EXPECT_EQ(o.devices, 0);  // auto
  EXPECT_EQ(o.precision, nullptr);
  EXPECT_EQ(o.gradient_clip_algorithm, DDP_CLIP_NORM);
}

// A program built against version 1 of ddp_strategy_options (before
// gradient_as_bucket_view) has a shorter struct: libddp writes and reads
// only version 1's fields for it.
TEST(Strategy, AVersionOneCallerIsServedWithinItsOwnStruct) {
  const size_t v1 = offsetof(ddp_strategy_options, gradient_as_bucket_view);
  std::vector<unsigned char> memory(v1 + 16, 0xAB);
  auto* o = reinterpret_cast<ddp_strategy_options*>(memory.data());
  ASSERT_EQ(ddp_strategy_options_init(o, 1), DDP_OK) << last();
  for (size_t i = v1; i < memory.size(); ++i) ASSERT_EQ(memory[i], 0xAB) << "byte " << i << " written";
  EXPECT_EQ(o->version, 1u);
  EXPECT_EQ(o->bucket_cap_mb, 25.0);
  EXPECT_EQ(o->broadcast_buffers, 1);
  // Nothing past its end is read: in an allocation of exactly version 1's
  // size, the sanitizer build would report the over-read.
  std::unique_ptr<unsigned char[]> exact(new unsigned char[v1]);
  std::memcpy(exact.get(), memory.data(), v1);
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, reinterpret_cast<ddp_strategy_options*>(exact.get())), DDP_OK) << last();
  ddp_strategy_free(s);
  ddp_strategy_options v2;
  ASSERT_EQ(ddp_strategy_options_init(&v2, DDP_STRATEGY_OPTIONS_VERSION), DDP_OK);
  v2.gradient_as_bucket_view = 1;
  ASSERT_EQ(ddp_strategy_new(&s, &v2), DDP_OK) << last();
  ddp_strategy_free(s);
}

// A program built against version 2 (before the precision and the rest of
// version 3) keeps its defaults, devices 1 among them, and nothing past its
// struct is read or written.
TEST(Strategy, AVersionTwoCallerKeepsItsDefaults) {
  const size_t v2 = offsetof(ddp_strategy_options, precision);
  std::vector<unsigned char> memory(v2 + 16, 0xAB);
  auto* o = reinterpret_cast<ddp_strategy_options*>(memory.data());
  ASSERT_EQ(ddp_strategy_options_init(o, 2), DDP_OK) << last();
  for (size_t i = v2; i < memory.size(); ++i) ASSERT_EQ(memory[i], 0xAB) << "byte " << i << " written";
  EXPECT_EQ(o->version, 2u);
  EXPECT_EQ(o->devices, 1);
  std::unique_ptr<unsigned char[]> exact(new unsigned char[v2]);
  std::memcpy(exact.get(), memory.data(), v2);
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, reinterpret_cast<ddp_strategy_options*>(exact.get())), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_devices(s), 1);
  EXPECT_STREQ(ddp_strategy_precision(s), "32-true");
  ddp_strategy_free(s);
}

TEST(Strategy, CallsOutOfOrderAreStateErrorsAndASingleProcessIsAWorldOfOne) {
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, nullptr), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_world_size(s), 1);
  EXPECT_EQ(ddp_strategy_is_global_zero(s), 1);
  EXPECT_EQ(ddp_strategy_group(s), nullptr);
  EXPECT_EQ(ddp_strategy_block_backward_sync(s, 1), DDP_E_STATE);
  EXPECT_EQ(ddp_strategy_barrier(s, "before setup"), DDP_E_STATE);
  EXPECT_TRUE(has(last(), "before setup_environment")) << last();
  int decision = 0;
  EXPECT_EQ(ddp_strategy_reduce_boolean_decision(s, 1, 1, &decision), DDP_E_STATE);
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  EXPECT_NE(ddp_strategy_group(s), nullptr);
  EXPECT_EQ(ddp_group_size(ddp_strategy_group(s)), 1);
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_STATE);  // twice
  EXPECT_EQ(ddp_strategy_barrier(s, "after setup"), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_block_backward_sync(s, 1), DDP_E_STATE);  // no module yet
  EXPECT_TRUE(has(last(), "setup_module")) << last();
  ddp_device d = ddp_strategy_root_device(s);
  EXPECT_EQ(d.type, DDP_DEVICE_CPU);
  float x[3] = {1, 2, 3};
  int64_t n[1] = {3};
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, n, 1), DDP_OK);
  EXPECT_EQ(ddp_strategy_reduce(s, t, DDP_MEAN), DDP_OK) << last();
  EXPECT_EQ(x[2], 3.0f);
  EXPECT_EQ(ddp_strategy_reduce(s, t, static_cast<ddp_reduce_op>(42)), DDP_E_INVALID_ARGUMENT);
  ddp_tensor* gathered = nullptr;
  ASSERT_EQ(ddp_strategy_all_gather(s, t, &gathered), DDP_OK) << last();
  EXPECT_EQ(ddp_tensor_shape(gathered)[0], 1);
  EXPECT_EQ(ddp_tensor_shape(gathered)[1], 3);
  ddp_tensor_free(gathered);
  ASSERT_EQ(ddp_strategy_all_gather_uneven(s, t, &gathered), DDP_OK) << last();
  EXPECT_EQ(ddp_tensor_numel(gathered), 3);
  ddp_tensor_free(gathered);
  ddp_buffer* bytes = nullptr;
  ASSERT_EQ(ddp_strategy_broadcast_bytes(s, "abc", 3, 0, &bytes), DDP_OK) << last();
  EXPECT_EQ(std::string(static_cast<const char*>(ddp_buffer_data(bytes)), ddp_buffer_size(bytes)), "abc");
  ddp_buffer_free(bytes);
  decision = -1;
  ASSERT_EQ(ddp_strategy_reduce_boolean_decision(s, 0, 1, &decision), DDP_OK) << last();
  EXPECT_EQ(decision, 0);
  ddp_tensor_free(t);
  EXPECT_EQ(ddp_strategy_teardown(s), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_group(s), nullptr);
  // A second setup in the same process works.
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_barrier(s, nullptr), DDP_OK) << last();
  ddp_strategy_free(s);
  EXPECT_EQ(ddp_strategy_world_size(s), -1);  // freed
}

// Under a launcher (here torchrun's variables: 1 process on this node),
// devices must match what it started: a strategy that asks for 2 would
// otherwise wait for a rank nobody starts.
TEST(Strategy, DevicesThatDisagreeWithTheLauncherAreRefusedAtOnce) {
  const char* vars[][2] = {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "1"},
                           {"GROUP_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29999"}};
  for (auto& kv : vars) setenv(kv[0], kv[1], 1);
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.devices = 2;
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "devices=2") && has(last(), "torchelastic") && has(last(), "started 1")) << last();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  ddp_strategy_free(s);
  // The default, auto, takes the launcher's count.
  ASSERT_EQ(ddp_strategy_new(&s, nullptr), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_devices(s), 0);
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_devices(s), 1);
  EXPECT_EQ(ddp_strategy_world_size(s), 1);
  ddp_strategy_free(s);
  for (auto& kv : vars) unsetenv(kv[0]);
}

// Lightning's cluster_environment=: the caller's callbacks replace
// detection; a failing callback or values out of range are named, before
// any group is joined, and setup can then be retried.
struct FakeCluster {
  int world = 1, rank = 0, fail_rank = 0;
  const char* addr = "127.0.0.1";
};
int fake_world(void* u) { return static_cast<FakeCluster*>(u)->world; }
int fake_rank(void* u) { auto* c = static_cast<FakeCluster*>(u); return c->fail_rank ? -7 : c->rank; }
int fake_zero(void*) { return 0; }
int fake_one(void*) { return 1; }
const char* fake_addr(void* u) { return static_cast<FakeCluster*>(u)->addr; }

TEST(Strategy, TheCallersClusterEnvironmentReplacesDetection) {
  FakeCluster c;
  ddp_cluster_callbacks cb = {&c, fake_world, fake_rank, fake_zero, fake_one, fake_zero, fake_addr, fake_zero};
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.cluster_callbacks = &cb;
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  c.fail_rank = 1;
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "global_rank failed (returned -7)")) << last();
  c.fail_rank = 0;
  c.rank = 3;
  c.world = 2;
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "caller's cluster environment")) << last();
  c.addr = nullptr;
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "main_address failed")) << last();
  EXPECT_EQ(ddp_strategy_group(s), nullptr);
  c = FakeCluster{};
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_world_size(s), 1);
  EXPECT_EQ(ddp_strategy_barrier(s, "after the caller's environment"), DDP_OK) << last();
  ddp_strategy_free(s);
  // As values: an environment of 2 on this node, while devices asks for 3.
  ddp_env* env = nullptr;
  ASSERT_EQ(ddp_env_new(&env, 0, 2, 0, 2, 0, "127.0.0.1", 29511), DDP_OK) << last();
  o = ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT;
  o.cluster_environment = env;
  o.devices = 3;
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  ddp_env_free(env);  // copied
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "devices=3") && has(last(), "started 2")) << last();
  ddp_strategy_free(s);
}

// The host cache's size comes from the environment: a bad one is refused by
// name before the group is joined, and nothing is left half set up.
TEST(Strategy, ABadHostCacheSizeIsNamedAndSetupCanBeRetried) {
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, nullptr), DDP_OK) << last();
  setenv("DDP_HOST_CACHE_MB", "2G", 1);
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "DDP_HOST_CACHE_MB='2G'")) << last();
  EXPECT_EQ(ddp_strategy_group(s), nullptr);
  setenv("DDP_HOST_CACHE_MB", "64", 1);
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_barrier(s, nullptr), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_teardown(s), DDP_OK) << last();
  ddp_strategy_free(s);
  unsetenv("DDP_HOST_CACHE_MB");
}

TEST(Strategy, LossesCheckTheirInputs) {
  float logits[6] = {1, 2, 3, 4, 5, 6};
  int64_t l_shape[2] = {2, 3};
  int64_t good_y[2] = {2, 0};
  int32_t bad_y[2] = {2, 0};
  int64_t y_shape[1] = {2};
  ddp_tensor *x = nullptr, *y = nullptr, *y32 = nullptr, *loss = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&x, logits, DDP_FLOAT32, l_shape, 2), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&y, good_y, DDP_INT64, y_shape, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&y32, bad_y, DDP_INT32, y_shape, 1), DDP_OK);
  ASSERT_EQ(ddp_loss_cross_entropy(x, y, &loss), DDP_OK) << last();
  float v = 0;
  ASSERT_EQ(ddp_tensor_copy_to(loss, &v, sizeof v), DDP_OK);
  // log-sum-exp of (1,2,3) minus 3, and of (4,5,6) minus 4, averaged.
  EXPECT_NEAR(v, 0.5 * ((std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3) +
                        (std::log(std::exp(4.0) + std::exp(5.0) + std::exp(6.0)) - 4)), 1e-5);
  ddp_tensor* half = nullptr;
  ASSERT_EQ(ddp_loss_scale(loss, 0.5, &half), DDP_OK) << last();
  float h = 0;
  ASSERT_EQ(ddp_tensor_copy_to(half, &h, sizeof h), DDP_OK);
  EXPECT_FLOAT_EQ(h, 0.5f * v);
  ddp_tensor_free(half);
  EXPECT_EQ(ddp_loss_scale(nullptr, 0.5, &half), DDP_E_INVALID_ARGUMENT);
  ddp_tensor_free(loss);
  EXPECT_EQ(ddp_loss_cross_entropy(x, y32, &loss), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "int64 class index")) << last();
  EXPECT_EQ(ddp_loss_mse(x, y, &loss), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "shape")) << last();
  ddp_optimizer* opt = nullptr;
  EXPECT_EQ(ddp_optimizer_new_sgd(&opt, nullptr, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_optimizer_zero_grad(nullptr), DDP_E_INVALID_ARGUMENT);
  ddp_tensor_free(x);
  ddp_tensor_free(y);
  ddp_tensor_free(y32);
}

}  // namespace

namespace {

// Lightning's checkpoint_io=: checkpoints kept in the caller's own storage
// (here a map in memory), with failures of each callback named.
struct MemoryStore {
  std::map<std::string, std::string> files;
  int fail_save = 0;
  int removed = 0;
  ddp_byte_sink* last_sink = nullptr;  // the sink of the latest load, kept past its call
};
int store_save(void* u, const char* path, const void* data, size_t len) {
  auto* m = static_cast<MemoryStore*>(u);
  if (m->fail_save) return m->fail_save;
  m->files[path] = std::string(static_cast<const char*>(data), len);
  return 0;
}
int store_load(void* u, const char* path, ddp_byte_sink* sink) {
  auto* m = static_cast<MemoryStore*>(u);
  m->last_sink = sink;
  auto it = m->files.find(path);
  if (it == m->files.end()) return 2;
  // In two pieces, as a reader of a stream would.
  size_t half = it->second.size() / 2;
  if (ddp_byte_sink_write(sink, it->second.data(), half) != DDP_OK) return 1;
  return ddp_byte_sink_write(sink, it->second.data() + half, it->second.size() - half) == DDP_OK ? 0 : 1;
}
int store_remove(void* u, const char* path) {
  auto* m = static_cast<MemoryStore*>(u);
  m->removed += static_cast<int>(m->files.erase(path));
  return 0;
}


// The names in a directory, sorted.
std::string listing(const std::string& dir) {
  std::string out;
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  for (const auto& n : names) out += n + " ";
  return out;
}

// The options' PowerSGD hook serves one strategy's module at a time: the
// module of a second strategy given the same options is refused until the
// first is torn down (both would mix their buckets and steps in one state).
TEST(Strategy, AStatefulHookInTheOptionsServesOneStrategyAtATime) {
  std::string why;
  const std::string data = export_digits("strategy_hook", &why);
  if (data.empty()) GTEST_SKIP() << why;
  ddp_comm_hook* powersgd = nullptr;
  ASSERT_EQ(ddp_comm_hook_powersgd(&powersgd, nullptr), DDP_OK);
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.comm_hook = powersgd;
  ddp_strategy *first = nullptr, *second = nullptr;
  ddp_module *a = nullptr, *b = nullptr;
  ASSERT_EQ(ddp_strategy_new(&first, &o), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_new(&second, &o), DDP_OK) << last();
  ddp_comm_hook_free(powersgd);  // the options' users keep their own references
  for (ddp_strategy* s : {first, second}) ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  ASSERT_EQ(ddp_module_load(&a, (data + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_module_load(&b, (data + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(first, a), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_setup_module(second, b), DDP_E_STATE);
  EXPECT_TRUE(has(last(), "this PowerSGD hook serves another reducer already")) << last();
  ASSERT_EQ(ddp_strategy_teardown(first), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_setup_module(second, b), DDP_OK) << "torn down, the first let the hook go: " << last();
  ddp_strategy_free(second);
  ddp_strategy_free(first);
  ddp_module_free(a);
  ddp_module_free(b);
  std::system(("rm -rf " + data).c_str());
}

TEST(Strategy, ACheckpointDirectoryKeepsTheNewestAndResumesFromTheNewestThatLoads) {
  std::string why;
  const std::string data = export_digits("strategy_dir", &why);
  if (data.empty()) GTEST_SKIP() << why;
  const std::string dir = data + "/run/ckpts";
  ddp_strategy* s = nullptr;
  ddp_module* m = nullptr;
  start_with_mlp(data, &s, &m);
  if (HasFatalFailure()) return;
  int resumed = -1;
  // A first start: no directory yet, nothing loaded.
  ASSERT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, nullptr,
                                         nullptr, nullptr), DDP_OK) << last();
  EXPECT_EQ(resumed, 0);
  // Bad arguments are named.
  EXPECT_EQ(ddp_strategy_resume_from_dir(s, nullptr, &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, nullptr, nullptr,
                                         nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, nullptr, nullptr,
                                         nullptr, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "resumed is NULL")) << last();
  EXPECT_EQ(ddp_strategy_save_checkpoint_to_dir(s, "", 1, &m, nullptr, 1, nullptr, 0, nullptr, 0, nullptr),
            DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_strategy_save_checkpoint_to_dir(s, dir.c_str(), -1, &m, nullptr, 1, nullptr, 0, nullptr, 0, nullptr),
            DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "keep_last -1 is negative")) << last();
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.samples_in_epoch = -5;
  EXPECT_EQ(ddp_strategy_save_checkpoint_to_dir(s, dir.c_str(), 2, &m, nullptr, 1, nullptr, 0, nullptr, 0, &info),
            DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "samples_in_epoch -5 is negative")) << last();
  // Three checkpoints, the newest two kept, under Lightning's names (0-based epoch of saving).
  for (int64_t step : {10, 20, 30}) {
    info = DDP_CHECKPOINT_INFO_INIT;
    info.step = step;
    info.epoch = step / 20;                         // 0, 1, 1
    info.samples_in_epoch = step == 20 ? 0 : step;  // 20: an epoch's end
    info.user = "u";
    info.user_len = 1;
    ASSERT_EQ(ddp_strategy_save_checkpoint_to_dir(s, dir.c_str(), 2, &m, nullptr, 1, nullptr, 0, nullptr, 0, &info),
              DDP_OK) << last();
  }
  EXPECT_EQ(listing(dir), "epoch=0-step=20.ckpt epoch=1-step=30.ckpt ");
  // The newest loads: its counters, samples_in_epoch, the world size that saved it, a report.
  ddp_checkpoint_info back = DDP_CHECKPOINT_INFO_INIT;
  ddp_buffer *user = nullptr, *report = nullptr;
  ASSERT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, &back, &user,
                                         &report), DDP_OK) << last();
  EXPECT_EQ(resumed, 1);
  EXPECT_EQ(back.step, 30);
  EXPECT_EQ(back.samples_in_epoch, 30);
  EXPECT_EQ(back.world_size, 1);
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(ddp_buffer_size(user), 1u);
  std::string text(static_cast<const char*>(ddp_buffer_data(report)), ddp_buffer_size(report));
  EXPECT_EQ(text, "resumed from " + dir + "/epoch=1-step=30.ckpt\n");
  ddp_buffer_free(user);
  ddp_buffer_free(report);
  // A version 1 caller gets only its own struct written.
  struct {
    ddp_checkpoint_info v1;
  } holder;
  std::memset(&holder, 0xAB, sizeof holder);
  holder.v1.version = 1;
  ASSERT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, &holder.v1,
                                         nullptr, nullptr), DDP_OK) << last();
  EXPECT_EQ(holder.v1.step, 30);
  EXPECT_EQ(static_cast<uint64_t>(holder.v1.samples_in_epoch), 0xABABABABABABABABull);
  // A damaged newest file is passed over for the next older, and the report says why.
  { std::ofstream(dir + "/epoch=2-step=40.ckpt") << "not a checkpoint"; }
  ASSERT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, &back,
                                         nullptr, &report), DDP_OK) << last();
  EXPECT_EQ(back.step, 30);
  text.assign(static_cast<const char*>(ddp_buffer_data(report)), ddp_buffer_size(report));
  EXPECT_TRUE(has(text, "passed over " + dir + "/epoch=2-step=40.ckpt: ")) << text;
  ddp_buffer_free(report);
  // None loads: DDP_E_IO naming each, and the module untouched.
  for (const char* name : {"/epoch=1-step=30.ckpt", "/epoch=0-step=20.ckpt"}) { std::ofstream(dir + name) << "x"; }
  EXPECT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, &back,
                                         nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "none of the 3 checkpoints in " + dir) && has(last(), "epoch=0-step=20.ckpt")) << last();
  EXPECT_EQ(resumed, 0);
  // A directory needs local files: not through the caller's checkpoint IO.
  MemoryStore store;
  ddp_checkpoint_io io = {&store, store_save, store_load, store_remove};
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.checkpoint_io = &io;
  ddp_strategy* with_io = nullptr;
  ASSERT_EQ(ddp_strategy_new(&with_io, &o), DDP_OK) << last();
  ddp_module_free(m);
  ddp_strategy_free(s);
  ASSERT_EQ(ddp_strategy_setup_environment(with_io), DDP_OK) << last();
  ASSERT_EQ(ddp_module_load(&m, (data + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(with_io, m), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_save_checkpoint_to_dir(with_io, dir.c_str(), 2, &m, nullptr, 1, nullptr, 0, nullptr, 0, nullptr),
            DDP_E_UNSUPPORTED);
  EXPECT_TRUE(has(last(), "needs local files")) << last();
  ddp_module_free(m);
  ddp_strategy_free(with_io);
  std::system(("rm -rf " + data).c_str());
}

}  // namespace


// A checkpoint whose saved random stream torch refuses (a damaged file) is
// passed over like any file that does not load, with nothing changed. It
// loaded (the modules too) and only the stream's restore, after the ranks
// had agreed, failed: resume_from_dir ended with DDP_E_INVALID_ARGUMENT on
// that rank, holding the newest file's weights, where another rank whose
// stream was sound went on with them.
TEST(Strategy, ACheckpointWhoseRandomStreamTorchRefusesIsPassedOverWithNothingChanged) {
  std::string why;
  const std::string data = export_digits("rng_stream", &why);
  if (data.empty()) GTEST_SKIP() << why;
  const std::string python = exporter_python();
  const std::string dir = data + "/ckpts";
  ddp_strategy* s = nullptr;
  ddp_module* m = nullptr;
  start_with_mlp(data, &s, &m);
  if (HasFatalFailure()) return;
  auto set_bias = [&](float v) {
    std::vector<float> ten(10, v);
    int64_t shape[1] = {10};
    ddp_tensor* t = nullptr;
    ASSERT_EQ(ddp_tensor_from_blob(&t, ten.data(), DDP_FLOAT32, shape, 1), DDP_OK);
    ASSERT_EQ(ddp_module_set(m, "fc3.bias", t), DDP_OK) << last();
    ddp_tensor_free(t);
  };
  auto bias = [&] {
    ddp_tensor* t = nullptr;
    EXPECT_EQ(ddp_module_get(m, "fc3.bias", &t), DDP_OK);
    const float v = static_cast<const float*>(ddp_tensor_data(t))[0];
    ddp_tensor_free(t);
    return v;
  };
  for (int64_t step : {10, 20}) {
    set_bias(static_cast<float>(step));
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    info.step = step;
    ASSERT_EQ(ddp_strategy_save_checkpoint_to_dir(s, dir.c_str(), 0, &m, nullptr, 1, nullptr, 0, nullptr, 0, &info),
              DDP_OK) << last();
  }
  set_bias(3.0f);
  const std::string newest = dir + "/epoch=0-step=20.ckpt";
  const std::string zero_stream = python + " -c \"import sys, torch; p = sys.argv[1]; "
                                  "c = torch.load(p, weights_only=True); c['libddp']['rng_states'][0].zero_(); "
                                  "torch.save(c, p)\" " + newest;
  ASSERT_EQ(std::system(zero_stream.c_str()), 0) << zero_stream;
  int resumed = -1;
  ddp_checkpoint_info back = DDP_CHECKPOINT_INFO_INIT;
  ddp_buffer* report = nullptr;
  ASSERT_EQ(ddp_strategy_resume_from_dir(s, dir.c_str(), &m, nullptr, 1, nullptr, 0, nullptr, 0, &resumed, &back,
                                         nullptr, &report), DDP_OK) << last();
  EXPECT_EQ(back.step, 10);
  EXPECT_EQ(bias(), 10.0f);
  std::string text(static_cast<const char*>(ddp_buffer_data(report)), ddp_buffer_size(report));
  EXPECT_TRUE(has(text, "passed over " + newest + ": load_checkpoint: " + newest + ": rank 0's RNG state")) << text;
  EXPECT_TRUE(has(text, "Invalid mt19937 state")) << text;
  ddp_buffer_free(report);
  // Loading it directly is refused likewise, and changes nothing.
  set_bias(3.0f);
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, newest.c_str(), m, nullptr, 0, nullptr, 0, nullptr, nullptr), DDP_E_IO);
  EXPECT_EQ(bias(), 3.0f);
  ddp_module_free(m);
  ddp_strategy_free(s);
  std::system(("rm -rf " + data).c_str());
}
// A checkpoint_io callback that tears down or frees the strategy whose
// call runs it: the teardown is DDP_E_STATE and the free frees nothing,
// since the running call goes on using the strategy (it went on in freed
// memory); the save and the load finish as usual.
struct TearingStore {
  ddp_strategy* s = nullptr;
  ddp_group* group = nullptr;  // the strategy's, borrowed
  MemoryStore files;
  int calls = 0;
  std::vector<std::string> problems;
  void tear(const char* in) {
    ++calls;
    if (ddp_strategy_teardown(s) != DDP_E_STATE || !has(last(), "called from code that a call of this strategy runs"))
      problems.push_back(std::string(in) + ": teardown: " + last());
    ddp_strategy_free(s);
    if (!has(last(), "ddp_strategy_free: called from code")) problems.push_back(std::string(in) + ": free: " + last());
    if (ddp_strategy_world_size(s) != 1) problems.push_back(std::string(in) + ": the strategy is gone");
    if (ddp_strategy_group(s) != group || ddp_group_size(group) != 1)
      problems.push_back(std::string(in) + ": the strategy's group handle is gone");
  }
};
int tearing_save(void* u, const char* path, const void* data, size_t len) {
  auto* t = static_cast<TearingStore*>(u);
  t->tear("save");
  return store_save(&t->files, path, data, len);
}
int tearing_load(void* u, const char* path, ddp_byte_sink* sink) {
  auto* t = static_cast<TearingStore*>(u);
  t->tear("load");
  return store_load(&t->files, path, sink);
}

TEST(Strategy, ACallbackThatTearsDownOrFreesItsStrategyIsRefused) {
  std::string why;
  const std::string dir = export_digits("strategy_tearing", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  TearingStore t;
  ddp_checkpoint_io io = {&t, tearing_save, tearing_load, store_remove};
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.checkpoint_io = &io;
  ASSERT_EQ(ddp_strategy_new(&t.s, &o), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_environment(t.s), DDP_OK) << last();
  t.group = ddp_strategy_group(t.s);
  ASSERT_NE(t.group, nullptr);
  ddp_module* m = nullptr;
  ASSERT_EQ(ddp_module_load(&m, (dir + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(t.s, m), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_save_checkpoint(t.s, "a.ckpt", m, nullptr, 12, 3, nullptr, 0), DDP_OK) << last();
  int64_t step = 0;
  ASSERT_EQ(ddp_strategy_load_checkpoint(t.s, "a.ckpt", m, nullptr, &step, nullptr, nullptr), DDP_OK) << last();
  EXPECT_EQ(step, 12);
  EXPECT_EQ(t.calls, 2);
  for (const auto& p : t.problems) ADD_FAILURE() << p;
  // Outside any call, both work.
  ASSERT_EQ(ddp_strategy_teardown(t.s), DDP_OK) << last();
  ddp_module_free(m);
  ddp_strategy_free(t.s);
  std::system(("rm -rf " + dir).c_str());
}

TEST(Strategy, CheckpointsGoThroughTheCallersCheckpointIO) {
  std::string why;
  const std::string dir = export_digits("strategy_io", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  MemoryStore store;
  ddp_checkpoint_io io = {&store, store_save, store_load, store_remove};
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.checkpoint_io = &io;
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  ddp_module* m = nullptr;
  ASSERT_EQ(ddp_module_load(&m, (dir + "/mlp.pt").c_str()), DDP_OK) << last();
  ASSERT_EQ(ddp_strategy_setup_module(s, m), DDP_OK) << last();
  const char user[] = "epoch state";
  ASSERT_EQ(ddp_strategy_save_checkpoint(s, "bucket/a.ckpt", m, nullptr, 12, 3, user, sizeof user), DDP_OK) << last();
  ASSERT_EQ(store.files.count("bucket/a.ckpt"), 1u);
  EXPECT_GT(store.files["bucket/a.ckpt"].size(), 1000u);
  struct stat st {};
  EXPECT_NE(stat("bucket/a.ckpt", &st), 0) << "written to a local file instead of the checkpoint IO";
  int64_t step = 0, epoch = 0;
  ddp_buffer* back = nullptr;
  ASSERT_EQ(ddp_strategy_load_checkpoint(s, "bucket/a.ckpt", m, nullptr, &step, &epoch, &back), DDP_OK) << last();
  EXPECT_EQ(step, 12);
  EXPECT_EQ(epoch, 3);
  EXPECT_EQ(std::string(static_cast<const char*>(ddp_buffer_data(back)), ddp_buffer_size(back)),
            std::string(user, sizeof user));
  ddp_buffer_free(back);
  // A sink kept past its load callback is refused (it wrote into the
  // callback's frame, gone by then).
  EXPECT_EQ(ddp_byte_sink_write(store.last_sink, "x", 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "live only during the load callback")) << last();
  // Damaged bytes from the storage are refused as a damaged file is.
  store.files["bucket/b.ckpt"] = store.files["bucket/a.ckpt"].substr(0, 200);
  EXPECT_EQ(ddp_strategy_load_checkpoint(s, "bucket/b.ckpt", m, nullptr, nullptr, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "bucket/b.ckpt")) << last();
  EXPECT_EQ(ddp_strategy_load_checkpoint(s, "bucket/none.ckpt", m, nullptr, nullptr, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "load callback returned 2 for 'bucket/none.ckpt'")) << last();
  store.fail_save = 5;
  EXPECT_EQ(ddp_strategy_save_checkpoint(s, "bucket/c.ckpt", m, nullptr, 0, 0, nullptr, 0), DDP_E_IO);
  EXPECT_TRUE(has(last(), "could not save") && has(last(), "save callback returned 5 for 'bucket/c.ckpt'")) << last();
  EXPECT_EQ(store.files.count("bucket/c.ckpt"), 0u);
  ASSERT_EQ(ddp_strategy_remove_checkpoint(s, "bucket/a.ckpt"), DDP_OK) << last();
  EXPECT_EQ(store.removed, 1);
  EXPECT_EQ(ddp_strategy_remove_checkpoint(s, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_byte_sink_write(nullptr, "x", 1), DDP_E_INVALID_ARGUMENT);
  ddp_module_free(m);
  ddp_strategy_free(s);
  std::system(("rm -rf " + dir).c_str());
}
