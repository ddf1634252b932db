// The training surface of issue 24 through the C API on one process: tensor
// arithmetic and autograd, losses with their arguments, modules with
// several inputs, named methods and tuple or dict outputs, seeding, logged
// metrics and the unrepeated sampler. Bad input gets a status naming what
// was wrong. Parity of the values with PyTorch and Lightning, and the
// 2-rank job: tests/parity/test_surface_parity.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "capi_test_util.h"

namespace {

std::string last() { return ddp_last_error_message(); }
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

ddp_tensor* blob(float* data, std::initializer_list<int64_t> shape) {
  ddp_tensor* t = nullptr;
  std::vector<int64_t> s(shape);
  EXPECT_EQ(ddp_tensor_from_blob(&t, data, DDP_FLOAT32, s.data(), s.size()), DDP_OK) << last();
  return t;
}

double item(const ddp_tensor* t) {
  double v = NAN;
  EXPECT_EQ(ddp_tensor_item(t, &v), DDP_OK) << last();
  return v;
}

TEST(TensorOps, ArithmeticKeepsTheGraphAndGradientsComeBack) {
  float a[3] = {1, 2, 3}, b[3] = {4, 5, 6};
  ddp_tensor *ta = blob(a, {3}), *tb = blob(b, {3});
  ASSERT_EQ(ddp_tensor_set_requires_grad(ta, 1), DDP_OK) << last();
  ddp_tensor *prod = nullptr, *sq = nullptr, *sum = nullptr;
  ASSERT_EQ(ddp_tensor_binary(DDP_OP_MUL, ta, tb, &prod), DDP_OK) << last();
  ASSERT_EQ(ddp_tensor_binary_scalar(DDP_OP_POW, prod, 2.0, &sq), DDP_OK) << last();
  ASSERT_EQ(ddp_tensor_sum(sq, nullptr, 0, 0, &sum), DDP_OK) << last();
  EXPECT_EQ(ddp_tensor_requires_grad(sum), 1);
  EXPECT_DOUBLE_EQ(item(sum), 16 + 100 + 324);
  ddp_tensor* g = nullptr;
  ASSERT_EQ(ddp_tensor_grad(ta, &g), DDP_OK);
  EXPECT_EQ(g, nullptr);  // no backward yet
  ASSERT_EQ(ddp_tensor_backward(sum), DDP_OK) << last();
  ASSERT_EQ(ddp_tensor_grad(ta, &g), DDP_OK) << last();
  ASSERT_NE(g, nullptr);
  float got[3];
  ASSERT_EQ(ddp_tensor_copy_to(g, got, sizeof got), DDP_OK);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(got[i], 2 * a[i] * b[i] * b[i]);  // d/da (ab)^2
  for (ddp_tensor* t : {ta, tb, prod, sq, sum, g}) ddp_tensor_free(t);
}

TEST(TensorOps, NoGradModeBuildsNoGraphAndIsPerCall) {
  float a[2] = {1, 2};
  ddp_tensor* ta = blob(a, {2});
  ASSERT_EQ(ddp_tensor_set_requires_grad(ta, 1), DDP_OK);
  int previous = -1;
  ASSERT_EQ(ddp_grad_set_enabled(0, &previous), DDP_OK);
  EXPECT_EQ(previous, 1);
  EXPECT_EQ(ddp_grad_is_enabled(), 0);
  ddp_tensor* e = nullptr;
  ASSERT_EQ(ddp_tensor_unary(DDP_OP_EXP, ta, &e), DDP_OK);
  EXPECT_EQ(ddp_tensor_requires_grad(e), 0);
  EXPECT_EQ(ddp_tensor_backward(e), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "does not require grad")) << last();
  ASSERT_EQ(ddp_grad_set_enabled(previous, nullptr), DDP_OK);
  EXPECT_EQ(ddp_grad_is_enabled(), 1);
  ddp_tensor_free(e);
  ddp_tensor_free(ta);
}

TEST(TensorOps, BadInputIsNamed) {
  float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 2, 3, 4};
  ddp_tensor *ta = blob(a, {2, 3}), *tb = blob(b, {4}), *out = nullptr;
  EXPECT_EQ(ddp_tensor_binary(DDP_OP_ADD, ta, tb, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "add") && has(last(), "[2, 3]") && has(last(), "[4]")) << last();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(ddp_tensor_binary(static_cast<ddp_binary_op>(99), ta, ta, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "99")) << last();
  EXPECT_EQ(ddp_tensor_unary(static_cast<ddp_unary_op>(77), ta, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_tensor_binary(DDP_OP_ADD, ta, nullptr, &out), DDP_E_INVALID_ARGUMENT);
  double v;
  EXPECT_EQ(ddp_tensor_item(ta, &v), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "6 elements")) << last();
  int64_t dim = 2;
  EXPECT_EQ(ddp_tensor_sum(ta, &dim, 1, 0, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "dim 2")) << last();
  EXPECT_EQ(ddp_tensor_sum(ta, nullptr, 1, 0, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_tensor_softmax(ta, -3, 0, &out), DDP_E_INVALID_ARGUMENT);
  int64_t ints[2] = {1, 2}, two = 2;
  ddp_tensor* ti = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&ti, ints, DDP_INT64, &two, 1), DDP_OK);
  EXPECT_EQ(ddp_tensor_set_requires_grad(ti, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "floating-point")) << last();
  EXPECT_EQ(ddp_tensor_mean(ti, nullptr, 0, 0, &out), DDP_E_INVALID_ARGUMENT);
  ASSERT_EQ(ddp_tensor_set_requires_grad(ta, 1), DDP_OK);
  ddp_tensor* neg = nullptr;
  ASSERT_EQ(ddp_tensor_unary(DDP_OP_NEG, ta, &neg), DDP_OK);
  EXPECT_EQ(ddp_tensor_set_requires_grad(neg, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "not a leaf")) << last();
  EXPECT_EQ(ddp_tensor_backward(neg), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "6 elements")) << last();
  ddp_tensor* freed = blob(b, {4});
  ddp_tensor_free(freed);
  EXPECT_EQ(ddp_tensor_unary(DDP_OP_EXP, freed, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "not a live ddp_tensor")) << last();
  for (ddp_tensor* t : {ta, tb, ti, neg}) ddp_tensor_free(t);
}

// An output too large for the host is DDP_E_NOMEM, not the caller's
// mistake: c10's CPU allocator throws a plain c10::Error for it.
TEST(TensorOps, AnOutputThatCannotBeAllocatedIsOutOfMemory) {
  const int64_t n = int64_t{1} << 23;  // [n, 1] + [1, n] broadcasts to 2^46 floats: 256 TiB
  ddp_tensor *column = nullptr, *row = nullptr, *out = nullptr;
  const int64_t column_shape[2] = {n, 1}, row_shape[2] = {1, n};
  const ddp_device cpu = DDP_DEVICE_CPU_INIT;
  ASSERT_EQ(ddp_tensor_new(&column, DDP_FLOAT32, column_shape, 2, cpu), DDP_OK) << last();
  ASSERT_EQ(ddp_tensor_new(&row, DDP_FLOAT32, row_shape, 2, cpu), DDP_OK) << last();
  EXPECT_EQ(ddp_tensor_binary(DDP_OP_ADD, column, row, &out), DDP_E_NOMEM) << last();
  EXPECT_TRUE(has(last(), "add") && has(last(), "out of memory")) << last();
  EXPECT_EQ(out, nullptr);
  ddp_tensor_free(column);
  ddp_tensor_free(row);

  const int64_t huge = int64_t{1} << 44;  // 64 TiB of floats
  ddp_tensor* zeros = nullptr;
  EXPECT_EQ(ddp_tensor_new(&zeros, DDP_FLOAT32, &huge, 1, cpu), DDP_E_NOMEM) << last();
  EXPECT_TRUE(has(last(), "zeros") && has(last(), "out of memory")) << last();
  EXPECT_EQ(zeros, nullptr);
}

TEST(Losses, ArgumentsAreCheckedByName) {
  float logits[6] = {1, 2, 3, 4, 5, 6}, w2[2] = {1, 1}, reg[6] = {0};
  int64_t y[2] = {2, 0}, two = 2;
  ddp_tensor *x = blob(logits, {2, 3}), *w = blob(w2, {2}), *r = blob(reg, {2, 3}), *ty = nullptr, *out = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&ty, y, DDP_INT64, &two, 1), DDP_OK);
  EXPECT_EQ(ddp_loss_compute(nullptr, x, ty, &out), DDP_E_INVALID_ARGUMENT);
  ddp_loss_options o = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_CROSS_ENTROPY);
  o.label_smoothing = 1.5;
  EXPECT_EQ(ddp_loss_compute(&o, x, ty, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "cross_entropy: label_smoothing")) << last();
  o.label_smoothing = 0;
  o.weight = w;
  EXPECT_EQ(ddp_loss_compute(&o, x, ty, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "weight [2] must have one entry per class (3)")) << last();
  ddp_loss_options m = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_MSE);
  m.reduction = DDP_REDUCTION_BATCHMEAN;
  EXPECT_EQ(ddp_loss_compute(&m, x, r, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'batchmean' is kl_div's only")) << last();
  ddp_loss_options k = DDP_LOSS_OPTIONS_INIT(static_cast<ddp_loss_kind>(42));
  EXPECT_EQ(ddp_loss_compute(&k, x, r, &out), DDP_E_INVALID_ARGUMENT);
  ddp_loss_options h = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_HUBER);
  h.delta = 0;
  EXPECT_EQ(ddp_loss_compute(&h, x, r, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "huber_loss: delta")) << last();
  ddp_loss_options n = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_NLL);
  EXPECT_EQ(ddp_loss_compute(&n, x, r, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "nll_loss: target must be one int64 class index")) << last();
  ddp_loss_options b = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_BCE_WITH_LOGITS);
  b.pos_weight = w;
  EXPECT_EQ(ddp_loss_compute(&b, x, r, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "pos_weight [2]")) << last();
  ddp_loss_options v2 = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_L1);
  v2.version = 7;
  EXPECT_EQ(ddp_loss_compute(&v2, x, r, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "version 7")) << last();
  EXPECT_EQ(out, nullptr);
  for (ddp_tensor* t : {x, w, r, ty}) ddp_tensor_free(t);
}

// The init functions give what the _INIT macros give, byte for byte (the
// bindings build their defaults from them), and refuse what they cannot fill.
TEST(OptionsInit, LossAndSchedulerFunctionsEqualTheirMacros) {
  for (int kind = DDP_LOSS_MSE; kind <= DDP_LOSS_KL_DIV; ++kind) {
    ddp_loss_options want = DDP_LOSS_OPTIONS_INIT(static_cast<ddp_loss_kind>(kind)), got;
    std::memset(&got, 0xAB, sizeof got);
    ASSERT_EQ(ddp_loss_options_init(&got, DDP_LOSS_OPTIONS_VERSION, static_cast<ddp_loss_kind>(kind)), DDP_OK);
    EXPECT_EQ(got.version, want.version) << "version";
    EXPECT_EQ(got.kind, want.kind) << "kind";
    EXPECT_EQ(got.reduction, want.reduction) << "reduction";
    EXPECT_EQ(got.weight, want.weight) << "weight";
    EXPECT_EQ(got.ignore_index, want.ignore_index) << "ignore_index";
    EXPECT_EQ(got.label_smoothing, want.label_smoothing) << "label_smoothing";
    EXPECT_EQ(got.pos_weight, want.pos_weight) << "pos_weight";
    EXPECT_EQ(got.beta, want.beta) << "beta";
    EXPECT_EQ(got.delta, want.delta) << "delta";
    EXPECT_EQ(got.log_target, want.log_target) << "log_target";
  }
  for (int kind = DDP_LR_STEP; kind <= DDP_LR_REDUCE_ON_PLATEAU; ++kind) {
    ddp_lr_scheduler_options want = DDP_LR_SCHEDULER_OPTIONS_INIT(static_cast<ddp_lr_scheduler_kind>(kind)), got;
    std::memset(&got, 0xAB, sizeof got);
    ASSERT_EQ(ddp_lr_scheduler_options_init(&got, DDP_LR_SCHEDULER_OPTIONS_VERSION,
                                            static_cast<ddp_lr_scheduler_kind>(kind)),
              DDP_OK);
    EXPECT_EQ(got.version, want.version) << "version";
    EXPECT_EQ(got.kind, want.kind) << "kind";
    EXPECT_EQ(got.step_size, want.step_size) << "step_size";
    EXPECT_EQ(got.milestones, want.milestones) << "milestones";
    EXPECT_EQ(got.num_milestones, want.num_milestones) << "num_milestones";
    EXPECT_EQ(got.gamma, want.gamma) << "gamma";
    EXPECT_EQ(got.t_max, want.t_max) << "t_max";
    EXPECT_EQ(got.eta_min, want.eta_min) << "eta_min";
    EXPECT_EQ(got.start_factor, want.start_factor) << "start_factor";
    EXPECT_EQ(got.end_factor, want.end_factor) << "end_factor";
    EXPECT_EQ(got.total_iters, want.total_iters) << "total_iters";
    EXPECT_EQ(got.max_lr, want.max_lr) << "max_lr";
    EXPECT_EQ(got.total_steps, want.total_steps) << "total_steps";
    EXPECT_EQ(got.pct_start, want.pct_start) << "pct_start";
    EXPECT_EQ(got.anneal_linear, want.anneal_linear) << "anneal_linear";
    EXPECT_EQ(got.cycle_momentum, want.cycle_momentum) << "cycle_momentum";
    EXPECT_EQ(got.base_momentum, want.base_momentum) << "base_momentum";
    EXPECT_EQ(got.max_momentum, want.max_momentum) << "max_momentum";
    EXPECT_EQ(got.div_factor, want.div_factor) << "div_factor";
    EXPECT_EQ(got.final_div_factor, want.final_div_factor) << "final_div_factor";
    EXPECT_EQ(got.three_phase, want.three_phase) << "three_phase";
    EXPECT_EQ(got.mode_max, want.mode_max) << "mode_max";
    EXPECT_EQ(got.factor, want.factor) << "factor";
    EXPECT_EQ(got.patience, want.patience) << "patience";
    EXPECT_EQ(got.threshold, want.threshold) << "threshold";
    EXPECT_EQ(got.threshold_abs, want.threshold_abs) << "threshold_abs";
    EXPECT_EQ(got.cooldown, want.cooldown) << "cooldown";
    EXPECT_EQ(got.min_lr, want.min_lr) << "min_lr";
    EXPECT_EQ(got.eps, want.eps) << "eps";
  }
  ddp_loss_options l;
  EXPECT_EQ(ddp_loss_options_init(nullptr, DDP_LOSS_OPTIONS_VERSION, DDP_LOSS_MSE), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_loss_options_init(&l, 9, DDP_LOSS_MSE), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "version 9")) << last();
  EXPECT_EQ(ddp_loss_options_init(&l, DDP_LOSS_OPTIONS_VERSION, static_cast<ddp_loss_kind>(8)), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "ddp_loss_options_init: unknown kind 8")) << last();
  ddp_lr_scheduler_options s;
  EXPECT_EQ(ddp_lr_scheduler_options_init(&s, DDP_LR_SCHEDULER_OPTIONS_VERSION, static_cast<ddp_lr_scheduler_kind>(-1)),
            DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "ddp_lr_scheduler_options_init: unknown kind -1")) << last();
}

// The surface test modules exported into a fresh directory.
class SurfaceModules : public testing::Test {
 protected:
  void SetUp() override {
    const char* exporter = std::getenv("DDP_EXPORT_SURFACE");
    if (!exporter) GTEST_SKIP() << "DDP_EXPORT_SURFACE is not set: the test modules cannot be exported";
    dir = testing::TempDir() + "/surface_" + std::to_string(getpid());
    if (std::system((std::string(exporter) + " " + dir + " >/dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "export_surface.py could not run (no torch?)";
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir.empty()) std::filesystem::remove_all(dir, ignored);
  }
  ddp_module* load(const char* name) {
    ddp_module* m = nullptr;
    EXPECT_EQ(ddp_module_load(&m, (dir + "/" + name).c_str()), DDP_OK) << last();
    return m;
  }
  std::string dir;
};

TEST_F(SurfaceModules, TupleOutputsAreReadByIndexAndDefaultsFillTheInputs) {
  ddp_module* m = load("pair.pt");
  float x[6] = {1, 2, 3, 4, 5, 6}, scale = 3;
  ddp_tensor *tx = blob(x, {2, 3}), *ts = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&ts, &scale, DDP_FLOAT32, nullptr, 0), DDP_OK);
  ddp_outputs* o = nullptr;
  const ddp_tensor* one[1] = {tx};
  ASSERT_EQ(ddp_module_call(m, nullptr, one, 1, &o), DDP_OK) << last();  // scale's default 2.0
  ASSERT_EQ(ddp_outputs_count(o), 2u);
  EXPECT_EQ(ddp_outputs_key(o, 0), nullptr);
  ddp_tensor *doubled = nullptr, *sums = nullptr, *none = nullptr;
  ASSERT_EQ(ddp_outputs_at(o, 0, &doubled), DDP_OK);
  ASSERT_EQ(ddp_outputs_at(o, 1, &sums), DDP_OK);
  float d[6], s[2];
  ASSERT_EQ(ddp_tensor_copy_to(doubled, d, sizeof d), DDP_OK);
  ASSERT_EQ(ddp_tensor_copy_to(sums, s, sizeof s), DDP_OK);
  EXPECT_FLOAT_EQ(d[5], 12);
  EXPECT_FLOAT_EQ(s[1], 15);
  EXPECT_EQ(ddp_outputs_at(o, 2, &none), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "index 2 is past the 2 outputs")) << last();
  EXPECT_EQ(ddp_outputs_get(o, "x", &none), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "not a dict")) << last();
  ddp_outputs_free(o);
  // A float argument cannot be given as a tensor: TorchScript's refusal, named.
  const ddp_tensor* two[2] = {tx, ts};
  EXPECT_EQ(ddp_module_call(m, "forward", two, 2, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "module forward") && has(last(), "scale")) << last();
  const ddp_tensor* three[3] = {tx, ts, tx};
  EXPECT_EQ(ddp_module_call(m, "forward", three, 3, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "3 inputs given, the method takes 1 to 2")) << last();
  EXPECT_EQ(o, nullptr);
  EXPECT_EQ(ddp_module_call(m, "forward", nullptr, 1, &o), DDP_E_INVALID_ARGUMENT);
  for (ddp_tensor* t : {tx, ts, doubled, sums}) ddp_tensor_free(t);
  ddp_module_free(m);
}

TEST_F(SurfaceModules, DictOutputsNamedMethodsAndParameterGradients) {
  ddp_module* m = load("two_heads.pt");
  float x[2 * 8], s[2 * 4];
  for (int i = 0; i < 16; ++i) x[i] = 0.1f * i;
  for (int i = 0; i < 8; ++i) s[i] = -0.2f * i;
  ddp_tensor *tx = blob(x, {2, 8}), *ts = blob(s, {2, 4});
  const ddp_tensor* in[2] = {tx, ts};
  ddp_outputs* o = nullptr;
  ASSERT_EQ(ddp_module_call(m, "forward", in, 2, &o), DDP_OK) << last();
  ASSERT_EQ(ddp_outputs_count(o), 2u);
  EXPECT_STREQ(ddp_outputs_key(o, 0), "logits");
  EXPECT_STREQ(ddp_outputs_key(o, 1), "reg");
  ddp_tensor *logits = nullptr, *missing = nullptr;
  ASSERT_EQ(ddp_outputs_get(o, "logits", &logits), DDP_OK);
  EXPECT_EQ(ddp_tensor_shape(logits)[1], 3);
  EXPECT_EQ(ddp_outputs_get(o, "probs", &missing), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "no key 'probs' (it has 'logits', 'reg')")) << last();
  ddp_tensor* g = nullptr;
  EXPECT_EQ(ddp_module_grad(m, "cls.weight", &g), DDP_OK);
  EXPECT_EQ(g, nullptr);
  ddp_tensor *sum = nullptr;
  ASSERT_EQ(ddp_tensor_sum(logits, nullptr, 0, 0, &sum), DDP_OK);
  ASSERT_EQ(ddp_tensor_backward(sum), DDP_OK) << last();
  ASSERT_EQ(ddp_module_grad(m, "cls.weight", &g), DDP_OK) << last();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(ddp_tensor_numel(g), 3 * 16);
  ddp_tensor* reg_grad = nullptr;
  ASSERT_EQ(ddp_module_grad(m, "reg.weight", &reg_grad), DDP_OK);
  EXPECT_EQ(reg_grad, nullptr);  // not in the loss
  EXPECT_EQ(ddp_module_grad(m, "norm.running_mean", &g), DDP_E_INVALID_ARGUMENT);  // a buffer
  EXPECT_TRUE(has(last(), "no parameter named 'norm.running_mean'")) << last();
  ddp_outputs* e = nullptr;
  ASSERT_EQ(ddp_module_call(m, "embed", in, 1, &e), DDP_OK) << last();
  EXPECT_EQ(ddp_outputs_count(e), 1u);
  EXPECT_EQ(ddp_module_call(m, "predict", in, 2, &e), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "no method named 'predict'")) << last();
  EXPECT_EQ(ddp_module_call(m, "forward", in, 1, &e), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "1 inputs given, the method takes 2")) << last();
  const ddp_tensor* swapped[2] = {ts, tx};
  EXPECT_EQ(ddp_module_call(m, "forward", swapped, 2, &e), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "module forward")) << last();
  // Keyword inputs: the same outputs as by position; unknown, doubled and missing ones named.
  const char* names[1] = {"s"};
  const ddp_tensor* values[1] = {ts};
  ddp_outputs *kw = nullptr, *pos = nullptr;
  ddp_tensor *kw_logits = nullptr, *pos_logits = nullptr;
  ASSERT_EQ(ddp_seed_everything(5, 0, nullptr), DDP_OK);  // the same dropout draws for both
  ASSERT_EQ(ddp_module_call(m, "forward", in, 2, &pos), DDP_OK) << last();
  ASSERT_EQ(ddp_seed_everything(5, 0, nullptr), DDP_OK);
  ASSERT_EQ(ddp_module_call_v2(m, "forward", in, 1, names, values, 1, &kw), DDP_OK) << last();
  ASSERT_EQ(ddp_outputs_get(kw, "logits", &kw_logits), DDP_OK);
  ASSERT_EQ(ddp_outputs_get(pos, "logits", &pos_logits), DDP_OK);
  EXPECT_EQ(std::memcmp(ddp_tensor_data(kw_logits), ddp_tensor_data(pos_logits), ddp_tensor_nbytes(pos_logits)), 0);
  for (ddp_tensor* t : {kw_logits, pos_logits}) ddp_tensor_free(t);
  ddp_outputs_free(kw);
  ddp_outputs_free(pos);
  kw = nullptr;
  const char* wrong[1] = {"side"};
  EXPECT_EQ(ddp_module_call_v2(m, "forward", in, 1, wrong, values, 1, &kw), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "side")) << last();
  EXPECT_EQ(ddp_module_call_v2(m, "forward", in, 2, names, values, 1, &kw), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'s'")) << last();
  EXPECT_EQ(ddp_module_call_v2(m, "forward", nullptr, 0, names, values, 1, &kw), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'x'")) << last();
  EXPECT_EQ(kw, nullptr);
  // The one-tensor forward refuses a dict output, pointing at the call.
  ddp_tensor* single = nullptr;
  EXPECT_EQ(ddp_module_forward(m, tx, &single), DDP_E_INVALID_ARGUMENT);
  for (ddp_tensor* t : {tx, ts, logits, sum, g}) ddp_tensor_free(t);
  ddp_outputs_free(o);
  ddp_module_free(m);
}

TEST_F(SurfaceModules, ParameterGroupsByNameAndTheirMistakes) {
  ddp_module* m = load("two_heads.pt");
  const char* no_decay[] = {"*.bias", "norm.*"};
  ddp_param_group g[2] = {DDP_PARAM_GROUP_INIT, DDP_PARAM_GROUP_INIT};
  g[1].patterns = no_decay;
  g[1].num_patterns = 2;
  g[1].weight_decay = 0;
  g[1].lr = 0.5;
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.1;
  ddp_optimizer* opt = nullptr;
  ASSERT_EQ(ddp_optimizer_new_sgd_groups(&opt, m, &sgd, g, 2), DDP_OK) << last();
  EXPECT_EQ(ddp_optimizer_num_groups(opt), 2u);
  double lr = 0;
  ASSERT_EQ(ddp_optimizer_group_lr(opt, 0, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.1);  // the optimizer's
  ASSERT_EQ(ddp_optimizer_group_lr(opt, 1, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.5);  // its own
  ASSERT_EQ(ddp_optimizer_set_group_lr(opt, 1, 0.25), DDP_OK);
  ASSERT_EQ(ddp_optimizer_group_lr(opt, 1, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.25);
  EXPECT_EQ(ddp_optimizer_group_lr(opt, 2, &lr), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "param group 2 is past its 2 groups")) << last();
  EXPECT_EQ(ddp_optimizer_set_group_lr(opt, 0, -1), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_optimizer_set_lr(opt, std::nan("")), DDP_E_INVALID_ARGUMENT);  // "nan is negative" said before
  EXPECT_TRUE(has(last(), "lr nan is not a number >= 0")) << last();
  // A scheduler moves every group from its own rate (PyTorch's per-group base_lrs).
  ddp_lr_scheduler_options so = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_STEP);
  so.gamma = 0.5;
  ddp_lr_scheduler* sched = nullptr;
  ASSERT_EQ(ddp_lr_scheduler_new(&sched, opt, &so), DDP_OK) << last();
  ASSERT_EQ(ddp_lr_scheduler_step(sched), DDP_OK);
  ASSERT_EQ(ddp_optimizer_group_lr(opt, 0, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.05);
  ASSERT_EQ(ddp_optimizer_group_lr(opt, 1, &lr), DDP_OK);
  EXPECT_DOUBLE_EQ(lr, 0.125);
  ddp_lr_scheduler_free(sched);
  ddp_optimizer_free(opt);

  ddp_optimizer* bad = nullptr;
  const char* nothing[] = {"encoder.*"};
  g[1].patterns = nothing;
  g[1].num_patterns = 1;
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, g, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "the pattern 'encoder.*' matches no parameter")) << last();
  const char* all[] = {"*"};
  g[1].patterns = all;
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, g, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "param group 0 (the rest): gets no parameter")) << last();
  ddp_param_group rest2[2] = {DDP_PARAM_GROUP_INIT, DDP_PARAM_GROUP_INIT};
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, rest2, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "already takes the rest")) << last();
  const char* biases[] = {"*.bias"};
  ddp_param_group only[1] = {DDP_PARAM_GROUP_INIT};
  only[0].patterns = biases;
  only[0].num_patterns = 1;
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, only, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "parameter 'body.weight' is in no group")) << last();
  only[0].momentum = 0.9;
  only[0].patterns = all;
  ddp_adam_options adam = DDP_ADAM_OPTIONS_INIT;
  EXPECT_EQ(ddp_optimizer_new_adam_groups(&bad, m, &adam, only, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "momentum is SGD's")) << last();
  only[0].momentum = DDP_INHERIT;
  only[0].lr = -0.5;
  EXPECT_EQ(ddp_optimizer_new_adamw_groups(&bad, m, &adam, only, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "param group 0: lr -0.5")) << last();
  only[0].version = 9;
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, only, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "unknown version 9")) << last();
  EXPECT_EQ(ddp_optimizer_new_sgd_groups(&bad, m, &sgd, nullptr, 0), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);
  ddp_module_free(m);
}

// A strategy of one process with `hook` (may be NULL) and the module set up.
ddp_strategy* one_rank_strategy(const ddp_comm_hook* hook, int64_t averaging_period = 0) {
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.comm_hook = hook;
  o.model_averaging_period = averaging_period;
  ddp_strategy* s = nullptr;
  EXPECT_EQ(ddp_strategy_new(&s, &o), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_setup_environment(s), DDP_OK) << last();
  return s;
}

TEST_F(SurfaceModules, ACommHooksStateResumesOnlyIntoTheSameKindOfHook) {
  ddp_powersgd_options po = DDP_POWERSGD_OPTIONS_INIT;
  po.start_powersgd_iter = 2;
  ddp_comm_hook *psgd = nullptr, *localsgd = nullptr;
  ASSERT_EQ(ddp_comm_hook_powersgd(&psgd, &po), DDP_OK) << last();
  ASSERT_EQ(ddp_comm_hook_post_localsgd(&localsgd, nullptr, 2, 1), DDP_OK) << last();
  const std::string ckpt = dir + "/hook_kinds.ckpt";
  {
    ddp_strategy* s = one_rank_strategy(psgd);
    ddp_module* m = load("two_heads.pt");
    ASSERT_EQ(ddp_strategy_setup_module(s, m), DDP_OK) << last();
    ASSERT_EQ(ddp_strategy_save_checkpoint_v2(s, ckpt.c_str(), m, nullptr, 0, nullptr, 0, nullptr), DDP_OK) << last();
    // Into the same kind of hook: fine.
    EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, ckpt.c_str(), m, nullptr, 0, nullptr, 0, nullptr, nullptr), DDP_OK)
        << last();
    ddp_module_free(m);
    ddp_strategy_free(s);
  }
  for (const ddp_comm_hook* other : {static_cast<const ddp_comm_hook*>(nullptr), static_cast<const ddp_comm_hook*>(localsgd)}) {
    ddp_strategy* s = one_rank_strategy(other, other ? 2 : 0);  // post-local SGD comes with averaging
    ddp_module* m = load("two_heads.pt");
    ASSERT_EQ(ddp_strategy_setup_module(s, m), DDP_OK) << last();
    EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s, ckpt.c_str(), m, nullptr, 0, nullptr, 0, nullptr, nullptr), DDP_E_IO);
    EXPECT_TRUE(has(last(), other ? "the state of PowerSGD hook, not post-local SGD's" : "this strategy has no comm hook"))
        << last();
    ddp_module_free(m);
    ddp_strategy_free(s);
  }
  ddp_comm_hook_free(psgd);
  ddp_comm_hook_free(localsgd);
}

TEST(CallerOwnedModels, TensorsByNameAreTheModelAndMistakesAreNamed) {
  float w[6] = {1, 2, 3, 4, 5, 6}, b[2] = {0.5f, -0.5f}, mean[2] = {0, 0};
  ddp_tensor *tw = blob(w, {2, 3}), *tb = blob(b, {2}), *tm = blob(mean, {2});
  ASSERT_EQ(ddp_tensor_set_requires_grad(tw, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_set_requires_grad(tb, 1), DDP_OK);
  const char* names[3] = {"fc.weight", "fc.bias", "norm.running_mean"};
  ddp_tensor* tensors[3] = {tw, tb, tm};
  const int is_buffer[3] = {0, 0, 1};
  ddp_module* m = nullptr;
  ASSERT_EQ(ddp_module_from_tensors(&m, names, tensors, is_buffer, 3), DDP_OK) << last();
  ASSERT_EQ(ddp_module_state_count(m), 3u);
  const char* name = nullptr;
  int is_param = -1;
  ASSERT_EQ(ddp_module_state_name(m, 2, &name, &is_param), DDP_OK);
  EXPECT_STREQ(name, "norm.running_mean");
  EXPECT_EQ(is_param, 0);
  // The caller's memory is the model: a set writes into it.
  float nw[6] = {9, 9, 9, 9, 9, 9};
  ddp_tensor* tnw = blob(nw, {2, 3});
  ASSERT_EQ(ddp_module_set(m, "fc.weight", tnw), DDP_OK) << last();
  EXPECT_EQ(w[5], 9.0f);
  // It has no forward of its own and no TorchScript to export.
  ddp_outputs* o = nullptr;
  const ddp_tensor* in[1] = {tb};
  EXPECT_EQ(ddp_module_call(m, nullptr, in, 1, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "no method named 'forward'")) << last();
  EXPECT_EQ(ddp_module_save(m, "/tmp/never.pt"), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "no TorchScript code to export")) << last();
  ddp_module_free(m);

  ddp_module* bad = nullptr;
  const char* twice[2] = {"fc.weight", "fc.weight"};
  EXPECT_EQ(ddp_module_from_tensors(&bad, twice, tensors, nullptr, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'fc.weight' is given twice")) << last();
  const char* nested[2] = {"fc", "fc.bias"};
  EXPECT_EQ(ddp_module_from_tensors(&bad, nested, tensors, nullptr, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'fc' is a tensor and also holds 'fc.bias'")) << last();
  const char* empty_part[1] = {"fc..weight"};
  EXPECT_EQ(ddp_module_from_tensors(&bad, empty_part, tensors, nullptr, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "empty part")) << last();
  ddp_tensor* derived = nullptr;
  ASSERT_EQ(ddp_tensor_unary(DDP_OP_NEG, tw, &derived), DDP_OK);
  ddp_tensor* not_leaf[1] = {derived};
  const char* one[1] = {"fc.weight"};
  EXPECT_EQ(ddp_module_from_tensors(&bad, one, not_leaf, nullptr, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'fc.weight' is not a leaf tensor")) << last();
  ddp_tensor* freed = blob(b, {2});
  ddp_tensor_free(freed);
  ddp_tensor* dangling[1] = {freed};
  EXPECT_EQ(ddp_module_from_tensors(&bad, one, dangling, nullptr, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "tensor 'fc.weight' is not a live ddp_tensor")) << last();
  const char* null_name[1] = {nullptr};
  EXPECT_EQ(ddp_module_from_tensors(&bad, null_name, tensors, nullptr, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(bad, nullptr);

  // Under a strategy of one process: its forward is the caller's.
  ddp_strategy* s = one_rank_strategy(nullptr);
  ASSERT_EQ(ddp_module_from_tensors(&m, names, tensors, is_buffer, 3), DDP_OK);
  ASSERT_EQ(ddp_strategy_setup_module(s, m), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_forward(s, m, tb, &derived), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "run its forward yourself")) << last();
  EXPECT_EQ(ddp_strategy_forward_end(s), DDP_E_STATE);
  ASSERT_EQ(ddp_strategy_forward_begin(s, m), DDP_OK) << last();
  EXPECT_EQ(ddp_strategy_forward_begin(s, m), DDP_E_STATE);
  ASSERT_EQ(ddp_strategy_forward_end(s), DDP_OK);
  int stepped = -1;
  EXPECT_EQ(ddp_strategy_optimizer_step_fn(s, [](void*) { return 7; }, nullptr, &stepped), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "returned 7")) << last();
  EXPECT_EQ(ddp_strategy_optimizer_step_fn(s, [](void* u) { return ++*static_cast<int*>(u), 0; }, &stepped, nullptr),
            DDP_OK);
  ddp_strategy_free(s);
  ddp_module_free(m);
  for (ddp_tensor* t : {tw, tb, tm, tnw}) ddp_tensor_free(t);
}

TEST(Seeding, LightningsSeedRulesAndTheDeterministicFlag) {
  unsetenv("PL_GLOBAL_SEED");
  int64_t used = -1;
  ASSERT_EQ(ddp_seed_everything(-1, 0, &used), DDP_OK) << last();
  EXPECT_EQ(used, 0);  // no seed, no PL_GLOBAL_SEED: 0
  ASSERT_EQ(ddp_seed_everything(1234, 1, &used), DDP_OK);
  EXPECT_STREQ(std::getenv("PL_GLOBAL_SEED"), "1234");
  EXPECT_STREQ(std::getenv("PL_SEED_WORKERS"), "1");
  setenv("PL_GLOBAL_SEED", "77", 1);
  int seeded = 0;
  ASSERT_EQ(ddp_reset_seed(&seeded), DDP_OK);
  EXPECT_EQ(seeded, 1);
  ASSERT_EQ(ddp_seed_everything(-1, 0, &used), DDP_OK);
  EXPECT_EQ(used, 77);
  setenv("PL_GLOBAL_SEED", "seven", 1);
  EXPECT_EQ(ddp_seed_everything(-1, 0, &used), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "PL_GLOBAL_SEED='seven'")) << last();
  EXPECT_EQ(ddp_seed_everything(4294967296LL, 0, &used), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "4294967296 is not in bounds")) << last();
  unsetenv("PL_GLOBAL_SEED");
  ASSERT_EQ(ddp_reset_seed(&seeded), DDP_OK);
  EXPECT_EQ(seeded, 0);
  EXPECT_EQ(ddp_is_deterministic(), 0);
  ASSERT_EQ(ddp_set_deterministic(1, 0), DDP_OK);
  EXPECT_EQ(ddp_is_deterministic(), 1);
  ASSERT_EQ(ddp_set_deterministic(0, 0), DDP_OK);
  EXPECT_EQ(ddp_is_deterministic(), 0);
}

TEST(Metrics, LightningsEpochReductionsOnOneRank) {
  ddp_metric *mean = nullptr, *sum = nullptr, *mx = nullptr, *mn = nullptr;
  ASSERT_EQ(ddp_metric_new(&mean, DDP_METRIC_MEAN), DDP_OK);
  ASSERT_EQ(ddp_metric_new(&sum, DDP_METRIC_SUM), DDP_OK);
  ASSERT_EQ(ddp_metric_new(&mx, DDP_METRIC_MAX), DDP_OK);
  ASSERT_EQ(ddp_metric_new(&mn, DDP_METRIC_MIN), DDP_OK);
  const double values[3] = {1.0, 4.0, 2.5};
  const int64_t sizes[3] = {2, 1, 1};
  for (int i = 0; i < 3; ++i)
    for (ddp_metric* m : {mean, sum, mx, mn}) ASSERT_EQ(ddp_metric_update(m, values[i], sizes[i]), DDP_OK);
  double v = 0;
  ASSERT_EQ(ddp_metric_compute(mean, nullptr, &v), DDP_OK);
  EXPECT_DOUBLE_EQ(v, (2 * 1.0 + 4.0 + 2.5) / 4);  // weighted by batch size
  ASSERT_EQ(ddp_metric_compute(sum, nullptr, &v), DDP_OK);
  EXPECT_DOUBLE_EQ(v, 7.5);
  ASSERT_EQ(ddp_metric_compute(mx, nullptr, &v), DDP_OK);
  EXPECT_DOUBLE_EQ(v, 4.0);
  ASSERT_EQ(ddp_metric_compute(mn, nullptr, &v), DDP_OK);
  EXPECT_DOUBLE_EQ(v, 1.0);
  ASSERT_EQ(ddp_metric_reset(mean), DDP_OK);
  ASSERT_EQ(ddp_metric_update(mean, 3.0, 5), DDP_OK);
  ASSERT_EQ(ddp_metric_compute(mean, nullptr, &v), DDP_OK);
  EXPECT_DOUBLE_EQ(v, 3.0);
  EXPECT_EQ(ddp_metric_update(mean, 1.0, -1), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "batch size -1")) << last();
  ddp_metric* bad = nullptr;
  EXPECT_EQ(ddp_metric_new(&bad, static_cast<ddp_metric_reduce>(9)), DDP_E_INVALID_ARGUMENT);
  // sync_dist needs a strategy that is set up.
  ddp_strategy* s = nullptr;
  ASSERT_EQ(ddp_strategy_new(&s, nullptr), DDP_OK);
  EXPECT_EQ(ddp_metric_compute(mean, s, &v), DDP_E_STATE);
  ddp_strategy_free(s);
  for (ddp_metric* m : {mean, sum, mx, mn}) ddp_metric_free(m);
  EXPECT_EQ(ddp_metric_update(mean, 1.0, 1), DDP_E_INVALID_ARGUMENT);  // freed
}

TEST(Sampler, AVersionOneCallerIsServedWithinItsOwnStruct) {
  // A version 1 struct followed by bytes that must stay untouched.
  struct {
    ddp_sampler_options v1;  // only its version-1 prefix is the caller's
  } holder;
  std::memset(&holder, 0xAB, sizeof holder);
  ASSERT_EQ(ddp_sampler_options_init(&holder.v1, 1), DDP_OK);
  EXPECT_EQ(holder.v1.version, 1u);
  EXPECT_EQ(holder.v1.shuffle, 1);
  int untouched;
  std::memcpy(&untouched, &holder.v1.unrepeated, sizeof untouched);
  EXPECT_EQ(static_cast<unsigned>(untouched), 0xABABABABu);
  ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
  o.unrepeated = 1;
  o.shuffle = 0;
  int64_t idx[4];
  size_t count = 0;
  ASSERT_EQ(ddp_sampler_indices(7, 2, 1, 0, &o, idx, 4, &count), DDP_OK) << last();
  ASSERT_EQ(count, 3u);  // 1, 3, 5: no padding
  EXPECT_EQ(idx[2], 5);
}

TEST(Sampler, CountsAreExactAtEveryInt64SizeAndACountListsNothing) {
  // ceil(n / R) as n + R - 1 over R wrapped negative near INT64_MAX.
  int64_t n = 0;
  ASSERT_EQ(ddp_sampler_num_samples(INT64_MAX, 3, 0, &n), DDP_OK) << last();
  EXPECT_EQ(n, INT64_MAX / 3 + 1);
  ASSERT_EQ(ddp_sampler_num_samples(INT64_MAX, 3, 1, &n), DDP_OK) << last();
  EXPECT_EQ(n, INT64_MAX / 3);
  ASSERT_EQ(ddp_sampler_num_samples(INT64_MAX, INT32_MAX, 0, &n), DDP_OK) << last();
  EXPECT_EQ(n, INT64_MAX / INT32_MAX + 1);
  // Sizing `out` for an epoch of 2^50 samples counts them: listing them
  // would take 8 PiB.
  ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
  size_t count = 0;
  ASSERT_EQ(ddp_sampler_indices(int64_t{1} << 50, 2, 1, 3, &o, nullptr, 0, &count), DDP_OK) << last();
  EXPECT_EQ(count, size_t{1} << 49);
  o.unrepeated = 1;
  ASSERT_EQ(ddp_sampler_indices(INT64_MAX, 2, 1, 3, &o, nullptr, 0, &count), DDP_OK) << last();
  EXPECT_EQ(count, (size_t{1} << 62) - 1);  // len(range(1, 2^63 - 1, 2))
  // Listing what cannot be held is refused by name, before any allocation.
  int64_t idx[2];
  count = 7;
  EXPECT_EQ(ddp_sampler_indices(INT64_MAX, 2, 1, 3, &o, idx, 2, &count), DDP_E_NOMEM);
  EXPECT_NE(last().find("too large to list"), std::string::npos) << last();
  EXPECT_EQ(count, 0u);
  // A count is checked as a listing is.
  EXPECT_EQ(ddp_sampler_indices(10, 2, 2, 0, nullptr, nullptr, 0, &count), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("rank 2 is outside [0, 2)"), std::string::npos) << last();
}

// All of an epoch's indices over `world` ranks from `start`, rank by rank.
std::vector<std::vector<int64_t>> shards(int64_t n, int world, int64_t epoch, int64_t start) {
  std::vector<std::vector<int64_t>> out;
  for (int r = 0; r < world; ++r) {
    ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
    o.start = start;
    size_t count = 0;
    EXPECT_EQ(ddp_sampler_indices(n, world, r, epoch, &o, nullptr, 0, &count), DDP_OK) << last();
    std::vector<int64_t> v(count);
    EXPECT_EQ(ddp_sampler_indices(n, world, r, epoch, &o, v.data(), v.size(), &count), DDP_OK) << last();
    out.push_back(v);
  }
  return out;
}

TEST(Sampler, AResumedEpochStartsWhereItStoodAndReshardsTheRestForAnotherWorldSize) {
  const int64_t n = 103, epoch = 5;
  const auto order = shards(n, 1, epoch, 0)[0];  // the epoch's permutation
  ASSERT_EQ(order.size(), 103u);
  // The same world size, 3 batches of 4 done on each of 2 ranks: each rank's tail.
  const auto whole = shards(n, 2, epoch, 0), resumed = shards(n, 2, epoch, 24);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(resumed[r], std::vector<int64_t>(whole[r].begin() + 12, whole[r].end())) << "rank " << r;
  // 3 ranks from there: the 79 entries left, each once, padded with the epoch's first entries to 81.
  const auto three = shards(n, 3, epoch, 24);
  std::vector<int64_t> seen;
  for (const auto& v : three) {
    EXPECT_EQ(v.size(), 27u);
    seen.insert(seen.end(), v.begin(), v.end());
  }
  std::vector<int64_t> expected(order.begin() + 24, order.end());
  expected.push_back(order[0]);
  expected.push_back(order[1]);
  std::sort(seen.begin(), seen.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(three[0][0], order[24]);
  EXPECT_EQ(three[1][26], order[0]);  // the wrap-around pads with the epoch's first entries
  EXPECT_EQ(three[2][26], order[1]);
  // Past the end nothing is left; a negative start is named.
  EXPECT_TRUE(shards(n, 2, epoch, 104)[1].empty());
  ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
  o.start = -1;
  size_t count = 0;
  EXPECT_EQ(ddp_sampler_indices(n, 2, 0, epoch, &o, nullptr, 0, &count), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("start -1 is negative"), std::string::npos) << last();
  // A version 2 caller's struct ends before start.
  struct {
    ddp_sampler_options v2;
  } holder;
  std::memset(&holder, 0xAB, sizeof holder);
  ASSERT_EQ(ddp_sampler_options_init(&holder.v2, 2), DDP_OK);
  EXPECT_EQ(holder.v2.version, 2u);
  EXPECT_EQ(holder.v2.unrepeated, 0);
  EXPECT_EQ(static_cast<uint64_t>(holder.v2.start), 0xABABABABABABABABull);
}

}  // namespace
