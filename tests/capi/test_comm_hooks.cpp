// Comm hook handles on one rank: option checks, statistics, wrapping a C
// hook, and (where a GPU is lent) the same hooks on NCCL and CUDA buffers.
// Their multi-rank behaviour and parity with PyTorch live in tests/mp and
// tests/parity.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <ddp/ddp.h>

#include "capi_test_util.h"

namespace {

std::string last() { return ddp_last_error_message(); }

TEST(PowerSgd, OptionsAreCheckedAndTheFieldIsNamed) {
  ddp_powersgd_options o;
  EXPECT_EQ(ddp_powersgd_options_init(&o, 99), DDP_E_INVALID_ARGUMENT);
  ASSERT_EQ(ddp_powersgd_options_init(&o, DDP_POWERSGD_OPTIONS_VERSION), DDP_OK);
  EXPECT_EQ(o.matrix_approximation_rank, 1);
  EXPECT_EQ(o.start_powersgd_iter, 1000);
  EXPECT_EQ(o.min_compression_rate, 2.0);
  EXPECT_EQ(o.use_error_feedback, 1);
  EXPECT_EQ(o.warm_start, 1);
  ddp_comm_hook* h = nullptr;

  o.start_powersgd_iter = 1;  // error feedback and warm start need > 1, as in PyTorch
  EXPECT_EQ(ddp_comm_hook_powersgd(&h, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_NE(last().find("start_powersgd_iter must be > 1"), std::string::npos) << last();
  o.use_error_feedback = 0;
  EXPECT_EQ(ddp_comm_hook_powersgd(&h, &o), DDP_E_INVALID_ARGUMENT);  // warm start still on
  o.warm_start = 0;
  ASSERT_EQ(ddp_comm_hook_powersgd(&h, &o), DDP_OK) << last();
  ddp_comm_hook_free(h);

  ddp_powersgd_options bad = DDP_POWERSGD_OPTIONS_INIT;
  bad.matrix_approximation_rank = 0;
  EXPECT_EQ(ddp_comm_hook_powersgd(&h, &bad), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("matrix_approximation_rank"), std::string::npos) << last();
  bad = ddp_powersgd_options DDP_POWERSGD_OPTIONS_INIT;
  bad.min_compression_rate = -1;
  EXPECT_EQ(ddp_comm_hook_powersgd(&h, &bad), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("min_compression_rate"), std::string::npos) << last();
  bad = ddp_powersgd_options DDP_POWERSGD_OPTIONS_INIT;
  bad.version = 7;
  EXPECT_EQ(ddp_comm_hook_powersgd(&h, &bad), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_comm_hook_powersgd(nullptr, nullptr), DDP_E_INVALID_ARGUMENT);
}

TEST(PowerSgd, StatisticsComeFromPowerSgdHooksAndTheirWrappers) {
  ddp_comm_hook *ps = nullptr, *wrapped = nullptr, *plain = nullptr;
  ASSERT_EQ(ddp_comm_hook_powersgd(&ps, nullptr), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_wrap_bf16(&wrapped, ps), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_allreduce(&plain), DDP_OK);
  ddp_compression_stats s{1, 1, 1};
  ASSERT_EQ(ddp_comm_hook_compression_stats(ps, &s), DDP_OK);
  EXPECT_EQ(s.numel_before, 0u);
  EXPECT_EQ(s.numel_after, 0u);
  EXPECT_EQ(s.iteration, 0);
  EXPECT_EQ(ddp_comm_hook_compression_stats(wrapped, &s), DDP_OK);
  EXPECT_EQ(ddp_comm_hook_compression_stats(plain, &s), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("not a PowerSGD hook"), std::string::npos) << last();
  EXPECT_EQ(ddp_comm_hook_compression_stats(ps, nullptr), DDP_E_INVALID_ARGUMENT);
  ddp_comm_hook_free(ps);
  ddp_comm_hook_free(wrapped);
  ddp_comm_hook_free(plain);
}

// A 16 x 8 weight and its bias on one rank, reduced for `steps` steps.
struct OneRankModel {
  std::vector<float> w = std::vector<float>(16 * 8), b = std::vector<float>(8);
  ddp_group* group = nullptr;
  ddp_tensor *tw = nullptr, *tb = nullptr;
  ddp_reducer* reducer = nullptr;

  explicit OneRankModel(ddp_device device = DDP_DEVICE_CPU_INIT) {
    EXPECT_EQ(single_rank_group(nullptr, device, &group), DDP_OK) << last();
    int64_t sw[2] = {16, 8}, sb[1] = {8};
    if (device.type == DDP_DEVICE_CPU) {
      EXPECT_EQ(ddp_tensor_from_blob(&tw, w.data(), DDP_FLOAT32, sw, 2), DDP_OK);
      EXPECT_EQ(ddp_tensor_from_blob(&tb, b.data(), DDP_FLOAT32, sb, 1), DDP_OK);
    } else {
      EXPECT_EQ(ddp_tensor_new(&tw, DDP_FLOAT32, sw, 2, device), DDP_OK) << last();
      EXPECT_EQ(ddp_tensor_new(&tb, DDP_FLOAT32, sb, 1, device), DDP_OK) << last();
    }
    ddp_tensor* grads[2] = {tw, tb};
    ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
    o.broadcast_parameters = 0;
    EXPECT_EQ(ddp_reducer_new(&reducer, group, nullptr, grads, 2, &o), DDP_OK) << last();
  }
  ~OneRankModel() {
    ddp_reducer_free(reducer);
    ddp_tensor_free(tw);
    ddp_tensor_free(tb);
    ddp_group_free(group);
  }
  // Fills the gradients from `seed`, reduces them, and reads them back.
  ddp_status step(unsigned seed) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal;
    std::vector<float> hw(w.size()), hb(b.size());
    for (auto& x : hw) x = normal(gen);
    for (auto& x : hb) x = normal(gen);
    input_w = hw;
    input_b = hb;
    EXPECT_EQ(ddp_tensor_copy_from(tw, hw.data(), hw.size() * sizeof(float)), DDP_OK) << last();
    EXPECT_EQ(ddp_tensor_copy_from(tb, hb.data(), hb.size() * sizeof(float)), DDP_OK) << last();
    ddp_status s = ddp_reducer_mark_ready(reducer, 1);
    if (s == DDP_OK) s = ddp_reducer_mark_ready(reducer, 0);
    if (s == DDP_OK) s = ddp_reducer_finish(reducer);
    EXPECT_EQ(ddp_tensor_copy_to(tw, w.data(), w.size() * sizeof(float)), DDP_OK);
    EXPECT_EQ(ddp_tensor_copy_to(tb, b.data(), b.size() * sizeof(float)), DDP_OK);
    return s;
  }
  std::vector<float> input_w, input_b;
};

// |W| after a rank-1 PowerSGD step is an outer product: every 2x2 minor vanishes.
double largest_minor(const std::vector<float>& w) {
  double worst = 0;
  for (int i = 1; i < 16; ++i)
    for (int j = 1; j < 8; ++j) worst = std::max(worst, std::abs(double(w[0]) * w[i * 8 + j] - double(w[j]) * w[i * 8]));
  return worst;
}

TEST(PowerSgd, OneRankCompressesFromTheStartStepAndCounts) {
  OneRankModel m;
  ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
  o.start_powersgd_iter = 2;
  ddp_comm_hook* h = nullptr;
  ASSERT_EQ(ddp_comm_hook_powersgd(&h, &o), DDP_OK);
  ASSERT_EQ(ddp_reducer_set_comm_hook(m.reducer, h), DDP_OK) << last();
  for (unsigned step = 0; step < 4; ++step) {
    ASSERT_EQ(m.step(step), DDP_OK) << last();
    EXPECT_EQ(m.b, m.input_b) << "the bias (a vector) is all-reduced as it is";
    if (step < 2) {
      EXPECT_EQ(m.w, m.input_w) << "plain all-reduce before the start step";
    } else {
      EXPECT_NE(m.w, m.input_w);
      EXPECT_LT(largest_minor(m.w), 1e-4) << "rank-1 after the start step";
    }
  }
  ddp_compression_stats s;
  ASSERT_EQ(ddp_comm_hook_compression_stats(h, &s), DDP_OK);
  EXPECT_EQ(s.iteration, 4);
  EXPECT_EQ(s.numel_before, 2u * (16 * 8 + 8));
  EXPECT_EQ(s.numel_after, 2u * ((16 + 8) * 1 + 8));
  ddp_comm_hook_free(h);
}

// A hook that keeps state between steps serves one reducer at a time: a
// second reducer would interleave its buckets and steps into the first's
// memories (PyTorch mixes them without a word). Stateless hooks are shared.
TEST(CommHooks, AStatefulHookServesOneReducerAtATime) {
  OneRankModel first, second;
  ddp_comm_hook *ps = nullptr, *ps_bf16 = nullptr, *local = nullptr, *fp16 = nullptr;
  ASSERT_EQ(ddp_comm_hook_powersgd(&ps, nullptr), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_wrap_bf16(&ps_bf16, ps), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_post_localsgd(&local, nullptr, 1, 1), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_fp16_compress(&fp16), DDP_OK);

  ASSERT_EQ(ddp_reducer_set_comm_hook(first.reducer, ps), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_set_comm_hook(first.reducer, ps), DDP_OK) << "setting the same hook again: " << last();
  EXPECT_EQ(ddp_reducer_set_comm_hook(second.reducer, ps), DDP_E_STATE);
  EXPECT_NE(last().find("this PowerSGD hook serves another reducer already"), std::string::npos) << last();
  EXPECT_EQ(ddp_reducer_set_comm_hook(second.reducer, ps_bf16), DDP_E_STATE) << "a wrapper of it is the same state";
  // The refused reducer keeps its own hook (the built-in all-reduce).
  ASSERT_EQ(second.step(3), DDP_OK) << last();
  EXPECT_EQ(second.w, second.input_w);

  ASSERT_EQ(ddp_reducer_set_comm_hook(second.reducer, local), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_set_comm_hook(first.reducer, local), DDP_E_STATE);
  EXPECT_NE(last().find("post-local SGD"), std::string::npos) << last();
  ASSERT_EQ(ddp_reducer_set_comm_hook(first.reducer, fp16), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_set_comm_hook(second.reducer, fp16), DDP_OK) << "a stateless hook is shared: " << last();

  // `first` let PowerSGD go when it took fp16, so its wrapper may serve `second`;
  // `second` let post-local SGD go, so `first` may take it.
  ASSERT_EQ(ddp_reducer_set_comm_hook(second.reducer, ps_bf16), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_set_comm_hook(first.reducer, local), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_set_comm_hook(first.reducer, ps), DDP_E_STATE);
  // `second` swaps one wrapper of PowerSGD for another: it holds PowerSGD
  // throughout, and still when the first wrapper is let go.
  ddp_comm_hook* ps_fp16 = nullptr;
  ASSERT_EQ(ddp_comm_hook_wrap_fp16(&ps_fp16, ps), DDP_OK);
  ASSERT_EQ(ddp_reducer_set_comm_hook(second.reducer, ps_fp16), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_set_comm_hook(first.reducer, ps), DDP_E_STATE);
  ddp_comm_hook_free(ps_fp16);
  // A freed reducer lets its hook go.
  ddp_reducer_free(second.reducer);
  second.reducer = nullptr;
  ASSERT_EQ(ddp_reducer_set_comm_hook(first.reducer, ps), DDP_OK) << last();
  for (unsigned step = 0; step < 3; ++step) ASSERT_EQ(first.step(step), DDP_OK) << last();
  ddp_compression_stats st;
  ASSERT_EQ(ddp_comm_hook_compression_stats(ps, &st), DDP_OK);
  EXPECT_EQ(st.iteration, 3) << "second's step did not go through PowerSGD";
  for (ddp_comm_hook* h : {ps, ps_bf16, local, fp16}) ddp_comm_hook_free(h);
}

// A C hook that doubles the bucket and records the dtype it was given.
ddp_status doubling_hook(ddp_group*, const ddp_comm_bucket* bucket, void* user) {
  *static_cast<ddp_dtype*>(user) = ddp_tensor_dtype(bucket->buffer);
  if (ddp_tensor_dtype(bucket->buffer) != DDP_FLOAT16) return DDP_E_INVALID_ARGUMENT;
  auto* x = static_cast<uint16_t*>(ddp_tensor_data(bucket->buffer));
  for (int64_t i = 0; i < ddp_tensor_numel(bucket->buffer); ++i) {
    if ((x[i] & 0x7c00) != 0x7c00) x[i] = uint16_t(x[i] + 0x0400);  // exponent + 1: times two in binary16
  }
  return DDP_OK;
}

TEST(CommHooks, ACustomCHookCanBeWrappedInFp16) {
  OneRankModel m;
  ddp_dtype seen = DDP_FLOAT32;
  ddp_comm_hook *c = nullptr, *w = nullptr;
  ASSERT_EQ(ddp_comm_hook_custom(&c, doubling_hook, &seen), DDP_OK);
  ASSERT_EQ(ddp_comm_hook_wrap_fp16(&w, c), DDP_OK) << last();
  ddp_comm_hook_free(c);  // the wrapper keeps what it needs
  ASSERT_EQ(ddp_reducer_set_comm_hook(m.reducer, w), DDP_OK) << last();
  ASSERT_EQ(m.step(7), DDP_OK) << last();
  EXPECT_EQ(seen, DDP_FLOAT16);
  for (size_t i = 0; i < m.w.size(); ++i) {
    float want = 2 * m.input_w[i];
    EXPECT_NEAR(m.w[i], want, std::abs(want) * 1e-3 + 1e-6) << i;
  }
  ddp_comm_hook_free(w);
}

// A custom hook that calls back into the reducer running it: each call is
// DDP_E_STATE naming the hook, a free frees nothing, and the step goes on
// (finish from the hook was DDP_E_INTERNAL, "bucket 0 was never started",
// and lost the step; set_sync(0) there left the step open for the next).
struct CallingBack {
  ddp_reducer* reducer = nullptr;
  int call = 0;
  ddp_status got = DDP_OK;
  std::string message;
  bool alive_after_free = false;
};

ddp_status calling_back_hook(ddp_group* g, const ddp_comm_bucket* bucket, void* user) {
  auto* c = static_cast<CallingBack*>(user);
  ddp_tensor* grad = nullptr;
  switch (c->call) {
    case 0: c->got = ddp_reducer_finish(c->reducer); break;
    case 1: c->got = ddp_reducer_mark_ready(c->reducer, 0); break;
    case 2: c->got = ddp_reducer_set_sync(c->reducer, 0); break;
    case 3: c->got = ddp_reducer_set_comm_hook(c->reducer, nullptr); break;
    case 4: c->got = ddp_reducer_join(c->reducer); break;
    case 5:
      ddp_reducer_free(c->reducer);
      c->got = DDP_E_STATE;
      c->alive_after_free = ddp_reducer_gradient(c->reducer, 0, &grad) == DDP_OK;
      ddp_tensor_free(grad);
      break;
  }
  c->message = ddp_last_error_message();
  return ddp_all_reduce(g, bucket->buffer, DDP_SUM);
}

TEST(CommHooks, AHookCallingBackIntoItsOwnReducerIsRefusedAndTheStepGoesOn) {
  OneRankModel m;
  CallingBack c;
  c.reducer = m.reducer;
  ddp_comm_hook* h = nullptr;
  ASSERT_EQ(ddp_comm_hook_custom(&h, calling_back_hook, &c), DDP_OK);
  ASSERT_EQ(ddp_reducer_set_comm_hook(m.reducer, h), DDP_OK) << last();
  ddp_comm_hook_free(h);
  for (int call = 0; call < 6; ++call) {
    c.call = call;
    c.got = DDP_OK;
    ASSERT_EQ(m.step(call), DDP_OK) << "call " << call << ": " << last();
    EXPECT_EQ(c.got, DDP_E_STATE) << "call " << call << ": " << c.message;
    EXPECT_NE(c.message.find("own comm hook"), std::string::npos) << "call " << call << ": " << c.message;
    for (size_t i = 0; i < m.w.size(); ++i) ASSERT_EQ(m.w[i], m.input_w[i]) << "call " << call << ", " << i;
  }
  EXPECT_TRUE(c.alive_after_free);
  ASSERT_EQ(m.step(9), DDP_OK) << last();  // and once more, with nothing called back
}

// set_sync is for between steps: turned off after a mark, the step stayed
// open and the next one found its marks ("gradient 1 was already marked
// ready in this step"). Now it is refused, and the step finishes as begun.
TEST(CommHooks, SetSyncInsideAStepIsRefusedAndTheStepFinishes) {
  OneRankModel m;
  ASSERT_EQ(ddp_reducer_mark_ready(m.reducer, 1), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_set_sync(m.reducer, 0), DDP_E_STATE);
  EXPECT_NE(last().find("set_sync: a step is in progress"), std::string::npos) << last();
  EXPECT_EQ(ddp_reducer_set_sync(m.reducer, 1), DDP_OK) << "no change is no harm: " << last();
  ASSERT_EQ(ddp_reducer_mark_ready(m.reducer, 0), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_finish(m.reducer), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_set_sync(m.reducer, 0), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_set_sync(m.reducer, 1), DDP_OK) << last();
  ASSERT_EQ(m.step(3), DDP_OK) << last();
}

// Where a GPU is lent: the hooks give the same results on CUDA buffers over
// NCCL as on host buffers over Gloo.
TEST(CommHooks, PowerSgdAndFp16OnNcclMatchGloo) {
  if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device on this machine: the NCCL path runs only where a GPU is lent";
  for (int which = 0; which < 2; ++which) {
    OneRankModel cpu;
    OneRankModel gpu(ddp_device{DDP_DEVICE_CUDA, 0});
    ASSERT_STREQ(ddp_group_backend(gpu.group), "nccl");
    for (OneRankModel* m : {&cpu, &gpu}) {
      ddp_comm_hook* h = nullptr;
      ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
      o.start_powersgd_iter = 2;
      ASSERT_EQ(which == 0 ? ddp_comm_hook_powersgd(&h, &o) : ddp_comm_hook_fp16_compress(&h), DDP_OK);
      ASSERT_EQ(ddp_reducer_set_comm_hook(m->reducer, h), DDP_OK) << last();
      ddp_comm_hook_free(h);
    }
    for (unsigned step = 0; step < 5; ++step) {
      ASSERT_EQ(cpu.step(step), DDP_OK) << last();
      ASSERT_EQ(gpu.step(step), DDP_OK) << last();
      for (size_t i = 0; i < cpu.w.size(); ++i) ASSERT_NEAR(cpu.w[i], gpu.w[i], 1e-4) << "hook " << which << " step " << step;
      for (size_t i = 0; i < cpu.b.size(); ++i) ASSERT_NEAR(cpu.b[i], gpu.b[i], 1e-4) << "hook " << which << " step " << step;
    }
  }
}

}  // namespace
