// LibTorch objects handed to libddp by address, in one process (a strategy
// of one rank): the caller's torch::optim optimizers as libddp optimizers
// (their state through a checkpoint and back, the kinds refused by name),
// ddp::Strategy's own mistakes, the LibTorch version check, and
// DistributedSampler's shards in a torch::data loader.
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <sstream>
#include <utility>
#include <string>
#include <vector>

#include "ddp/torch.hpp"
#include "ddp/torch_data.hpp"
#include "ddp/torch_nn.hpp"

namespace {

std::string last() { return ddp_last_error_message(); }
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string temp_path(const std::string& name) { return testing::TempDir() + "/" + name + std::to_string(getpid()); }

ddp::Strategy& one_rank() {
  static ddp::Strategy* s = [] {
    ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
    o.timeout_ms = 30000;
    return new ddp::Strategy(o);  // lives for the whole test program
  }();
  return *s;
}

TEST(TorchVersion, TheSameMinorReleaseIsTakenAnotherIsRefusedNamingBoth) {
  const std::string mine = ddp_torch_version();
  EXPECT_EQ(mine, std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                      std::to_string(TORCH_VERSION_PATCH));
  const std::string minor = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);
  EXPECT_EQ(ddp_torch_check_version((minor + ".9+cu130").c_str()), DDP_OK) << last();
  EXPECT_EQ(ddp_torch_check_version(minor.c_str()), DDP_OK) << last();
  const std::string other = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR + 1) + ".0";
  EXPECT_EQ(ddp_torch_check_version(other.c_str()), DDP_E_UNSUPPORTED);
  EXPECT_TRUE(has(last(), "the caller's LibTorch is " + other) && has(last(), "built against LibTorch " + mine))
      << last();
  EXPECT_EQ(ddp_torch_check_version("1.13.1"), DDP_E_UNSUPPORTED);
  EXPECT_EQ(ddp_torch_check_version("nightly"), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "'nightly' is not a version")) << last();
  EXPECT_EQ(ddp_torch_check_version(nullptr), DDP_E_INVALID_ARGUMENT);
}

TEST(TorchOptimizers, TheKindsCheckpointsHoldAreTakenOthersAreRefusedByName) {
  torch::nn::Linear net(3, 2);
  ddp_optimizer* h = nullptr;
  EXPECT_EQ(ddp_optimizer_from_torch(&h, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_optimizer_from_torch(nullptr, &h), DDP_E_INVALID_ARGUMENT);
  torch::optim::RMSprop rms(net->parameters(), torch::optim::RMSpropOptions(0.01));
  torch::optim::Optimizer* base = &rms;
  EXPECT_EQ(ddp_optimizer_from_torch(&h, base), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "none of SGD, Adam and AdamW")) << last();
  EXPECT_EQ(h, nullptr);

  // Two groups, each with its rate: the handle sees the caller's groups.
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<at::Tensor>{net->weight},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.1).momentum(0.9)));
  groups.emplace_back(std::vector<at::Tensor>{net->bias},
                      std::make_unique<torch::optim::SGDOptions>(torch::optim::SGDOptions(0.02).momentum(0.9)));
  torch::optim::SGD sgd(groups, torch::optim::SGDOptions(0.1).momentum(0.9));
  h = ddp::optimizer_from(sgd);
  ASSERT_EQ(ddp_optimizer_num_groups(h), 2u);
  double lr = 0;
  ASSERT_EQ(ddp_optimizer_group_lr(h, 1, &lr), DDP_OK);
  EXPECT_EQ(lr, 0.02);
  // A scheduler's rate reaches the caller's optimizer.
  ASSERT_EQ(ddp_optimizer_set_group_lr(h, 1, 0.5), DDP_OK);
  EXPECT_EQ(static_cast<torch::optim::SGDOptions&>(sgd.param_groups()[1].options()).lr(), 0.5);
  ddp_optimizer_free(h);  // the handle, never the optimizer
  EXPECT_EQ(sgd.param_groups().size(), 2u);
}

struct Net : torch::nn::Module {
  torch::nn::Linear fc{nullptr};
  Net() { fc = register_module("fc", torch::nn::Linear(4, 2)); }
};

TEST(TorchStrategy, AnAdamsStateGoesThroughACheckpointAndBack) {
  ddp::Strategy& s = one_rank();
  torch::manual_seed(0);
  auto net = std::make_shared<Net>();
  s.setup(*net, "net.");
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
  s.add_optimizer(adam);
  auto step = [&] {
    auto x = torch::randn({8, 4});
    auto loss = s.forward(*net, [&] { return net->fc->forward(x); }).pow(2).mean();
    adam.zero_grad();
    s.backward(loss);
    EXPECT_TRUE(s.optimizer_step(adam));
  };
  for (int i = 0; i < 3; ++i) step();
  auto state_of = [&](const at::Tensor& p) -> torch::optim::AdamParamState& {
    return static_cast<torch::optim::AdamParamState&>(*adam.state().at(p.unsafeGetTensorImpl()));
  };
  const at::Tensor exp_avg = state_of(net->fc->weight).exp_avg().clone();
  const at::Tensor weight = net->fc->weight.detach().clone();
  const std::string path = temp_path("adam.ckpt");
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.step = 3;
  s.save_checkpoint(path, info);
  for (int i = 0; i < 2; ++i) step();
  ASSERT_EQ(state_of(net->fc->weight).step(), 5);
  EXPECT_EQ(s.load_checkpoint(path).step, 3);
  EXPECT_EQ(state_of(net->fc->weight).step(), 3);
  EXPECT_TRUE(torch::equal(state_of(net->fc->weight).exp_avg(), exp_avg));
  EXPECT_TRUE(torch::equal(net->fc->weight, weight));

  // The strategy's own mistakes: a module or optimizer it was not given.
  Net stranger;
  torch::optim::SGD other(stranger.parameters(), torch::optim::SGDOptions(0.1));
  try {
    s.forward(stranger, [] { return at::Tensor(); });
    ADD_FAILURE() << "a module never set up was run";
  } catch (const ddp::error& e) {
    EXPECT_EQ(e.status, DDP_E_STATE);
    EXPECT_TRUE(has(e.what(), "this module was not set up")) << e.what();
  }
  try {
    s.optimizer_step(other);
    ADD_FAILURE() << "an optimizer never added was stepped";
  } catch (const ddp::error& e) {
    EXPECT_EQ(e.status, DDP_E_STATE);
  }
  std::remove(path.c_str());
}

// Issue 25: a checkpoint directory through ddp::Strategy; resuming also
// restores the random stream, so a resumed run draws what the unstopped one
// drew (dropout masks, randn); a plain load_checkpoint leaves it alone.
TEST(TorchStrategy, ResumingFromADirectoryRestoresTheModelTheOptimizerAndTheRandomStream) {
  ddp::Strategy& s = one_rank();
  torch::manual_seed(7);
  auto net = std::make_shared<Net>();
  s.setup(*net, "net.");
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  s.add_optimizer(sgd);
  const std::string dir = temp_path("resume_dir");
  EXPECT_FALSE(s.resume_from_dir(dir));  // a first start
  auto step = [&] {
    auto x = torch::randn({8, 4});  // drawn from the stream the checkpoint keeps
    auto loss = s.forward(*net, [&] { return net->fc->forward(x); }).pow(2).mean();
    sgd.zero_grad();
    s.backward(loss);
    EXPECT_TRUE(s.optimizer_step(sgd));
    return loss.item<double>();
  };
  for (int i = 0; i < 3; ++i) step();
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.step = 3;
  s.save_checkpoint_to_dir(dir, 2, info);
  std::vector<double> unstopped;
  for (int i = 0; i < 3; ++i) unstopped.push_back(step());
  const at::Tensor weight_after = net->fc->weight.detach().clone();
  torch::randn({1000});  // the stream moves on
  ddp_checkpoint_info back = DDP_CHECKPOINT_INFO_INIT;
  ASSERT_TRUE(s.resume_from_dir(dir, &back));
  EXPECT_EQ(back.step, 3);
  EXPECT_EQ(back.world_size, 1);
  std::vector<double> resumed;
  for (int i = 0; i < 3; ++i) resumed.push_back(step());
  EXPECT_EQ(resumed, unstopped);
  EXPECT_TRUE(torch::equal(net->fc->weight, weight_after));
  // load_checkpoint restores the model and the optimizer, not the stream.
  torch::manual_seed(99);
  const at::Tensor expected = torch::randn({4});
  torch::manual_seed(99);
  s.load_checkpoint(dir + "/epoch=0-step=3.ckpt");
  EXPECT_TRUE(torch::equal(torch::randn({4}), expected));
  std::system(("rm -rf " + dir).c_str());
}

TEST(TorchStrategy, AnotherKindsStateIsRefusedAndNothingChanges) {
  ddp::Strategy& s = one_rank();
  auto net = std::make_shared<Net>();
  auto path = temp_path("adam_for_sgd.ckpt");
  {
    // An Adam checkpoint of this model, written through the C API.
    ddp_module* m = ddp::module_from(*net);
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(0.01));
    ddp_optimizer* o = ddp::optimizer_from(adam);
    net->fc->forward(torch::ones({1, 4})).sum().backward();
    adam.step();
    ASSERT_EQ(ddp_strategy_save_checkpoint_v2(s.get(), path.c_str(), m, &o, 1, nullptr, 0, nullptr), DDP_OK) << last();
    ddp_optimizer_free(o);
    ddp_module_free(m);
  }
  ddp_module* m = ddp::module_from(*net);
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  ddp_optimizer* o = ddp::optimizer_from(sgd);
  EXPECT_EQ(ddp_strategy_load_checkpoint_v2(s.get(), path.c_str(), m, &o, 1, nullptr, 0, nullptr, nullptr), DDP_E_IO);
  EXPECT_TRUE(has(last(), "not a buffer of this optimizer")) << last();
  EXPECT_TRUE(sgd.state().empty());
  ddp_optimizer_free(o);
  ddp_module_free(m);
  std::remove(path.c_str());
}

std::vector<int64_t> c_indices(int64_t size, int replicas, int rank, int64_t epoch, const ddp_sampler_options& o) {
  size_t count = 0;
  EXPECT_EQ(ddp_sampler_indices(size, replicas, rank, epoch, &o, nullptr, 0, &count), DDP_OK);
  std::vector<int64_t> v(count);
  EXPECT_EQ(ddp_sampler_indices(size, replicas, rank, epoch, &o, v.data(), count, &count), DDP_OK);
  return v;
}

// The C API's order is DistributedSampler's (tests/parity/test_sampler_parity.py):
// through a torch::data loader each rank's batches hold exactly that order,
// epoch by epoch, and the ranks' shards cover the dataset.
TEST(TorchData, ADataLoaderOverTheSamplerYieldsDistributedSamplersShards) {
  const int64_t size = 23;
  auto dataset = torch::data::datasets::TensorDataset(torch::arange(size).unsqueeze(1));
  for (int unrepeated : {0, 1}) {
    ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
    o.seed = 7;
    o.unrepeated = unrepeated;
    std::vector<int> seen(size, 0);
    for (int rank = 0; rank < 3; ++rank) {
      ddp::DistributedSampler sampler(size, 3, rank, o);
      auto loader = torch::data::make_data_loader(dataset, sampler, torch::data::DataLoaderOptions(4));
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        sampler.set_epoch(epoch);  // reaches the loader's copy
        std::vector<int64_t> got;
        for (auto& batch : *loader)
          for (auto& example : batch) got.push_back(example.data.item<int64_t>());
        EXPECT_EQ(got, c_indices(size, 3, rank, epoch, o)) << "rank " << rank << " epoch " << epoch;
        if (epoch == 0)
          for (int64_t i : got) ++seen[static_cast<size_t>(i)];
      }
    }
    for (int64_t i = 0; i < size; ++i) EXPECT_GE(seen[static_cast<size_t>(i)], 1) << i;
    if (unrepeated)
      for (int64_t i = 0; i < size; ++i) EXPECT_EQ(seen[static_cast<size_t>(i)], 1) << i;
  }
  // Epochs change the order; the sampler's own set_epoch + reset is the loader's reset.
  ddp::DistributedSampler s(size, 2, 1);
  auto first = s.next(100).value();
  s.set_epoch(1);
  s.reset();
  auto second = s.next(100).value();
  EXPECT_NE(first, second);
  EXPECT_EQ(second.size(), 12u);  // ceil(23 / 2), padded by wrapping around
  EXPECT_FALSE(s.next(1).has_value());
  // A checkpoint of the sampler resumes mid-epoch.
  s.reset();
  s.next(5);
  torch::serialize::OutputArchive out;
  s.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  ddp::DistributedSampler r(size, 2, 1);
  torch::serialize::InputArchive in;
  std::istringstream back(bytes.str());
  in.load_from(back);
  r.load(in);
  EXPECT_EQ(r.epoch(), 1);
  EXPECT_EQ(r.next(100).value(), std::vector<size_t>(second.begin() + 5, second.end()));
  try {
    ddp::DistributedSampler bad(size, 2, 2);
    ADD_FAILURE() << "rank 2 of 2 was taken";
  } catch (const ddp::error& e) {
    EXPECT_EQ(e.status, DDP_E_INVALID_ARGUMENT);
  }
}

// A model given as tensors lives on one device, with data: a buffer on
// another device than the parameters, or tensors on the meta device (shapes
// without memory), are refused by name before any collective could read them.
TEST(TorchModel, ATensorOnAnotherDeviceOrWithoutDataIsRefusedByName) {
  struct Placed : torch::nn::Module {
    Placed(torch::Device params, torch::Device buffers) {
      register_parameter("w", torch::ones({3}, params));
      register_buffer("stats", torch::zeros({3}, buffers));
    }
  };
  Placed split(torch::kCPU, torch::kMeta);
  EXPECT_THROW(ddp::module_from(split), ddp::error);
  EXPECT_TRUE(has(last(), "buffer 'stats' is on meta but 'w' is on cpu")) << last();
  Placed shapes_only(torch::kMeta, torch::kMeta);
  EXPECT_THROW(ddp::module_from(shapes_only), ddp::error);
  EXPECT_TRUE(has(last(), "parameter 'w' is on the meta device (it has no data)")) << last();
  Placed fine(torch::kCPU, torch::kCPU);
  ddp_module* m = ddp::module_from(fine);
  ddp_module_free(m);
}

// ddp_strategy_batch_norm's mistakes, named; eval needs no group.
TEST(TorchSyncBatchNorm, BadShapesOneValuePerChannelAndNoGroupAreNamed) {
  ddp_strategy* fresh = nullptr;
  ASSERT_EQ(ddp_strategy_new(&fresh, nullptr), DDP_OK);
  at::Tensor x = torch::randn({4, 3}), w = torch::ones({3}), wrong = torch::ones({4}), rm = torch::zeros({3}),
             rv = torch::ones({3});
  ddp_tensor *hx = nullptr, *hw = nullptr, *hwrong = nullptr, *hrm = nullptr, *hrv = nullptr, *out = nullptr;
  for (auto [h, t] : {std::pair{&hx, &x}, {&hw, &w}, {&hwrong, &wrong}, {&hrm, &rm}, {&hrv, &rv}})
    ASSERT_EQ(ddp_tensor_from_aten(h, t), DDP_OK);
  EXPECT_EQ(ddp_strategy_batch_norm(fresh, hx, hw, nullptr, hrm, hrv, 1, 0.1, 1e-5, &out), DDP_E_STATE);
  EXPECT_EQ(out, nullptr);
  ASSERT_EQ(ddp_strategy_batch_norm(fresh, hx, hw, nullptr, hrm, hrv, 0, 0.1, 1e-5, &out), DDP_OK) << last();
  at::Tensor y;
  ASSERT_EQ(ddp_tensor_to_aten(out, &y), DDP_OK);
  EXPECT_TRUE(torch::allclose(y, x / std::sqrt(1 + 1e-5)));  // eval: the running statistics
  ddp_tensor_free(out);
  EXPECT_EQ(ddp_strategy_batch_norm(fresh, hx, hwrong, nullptr, nullptr, nullptr, 0, 0.1, 1e-5, &out),
            DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "shape [4] for 3 channels")) << last();
  EXPECT_EQ(ddp_strategy_batch_norm(fresh, hx, hw, nullptr, hrm, hrv, 1, 0.1, 1e-5, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_tensor_to_aten(hx, nullptr), DDP_E_INVALID_ARGUMENT);
  ddp_strategy_free(fresh);

  // One value per channel over the whole group cannot be normalised.
  ddp::Strategy& s = one_rank();
  at::Tensor one = torch::randn({1, 3});
  ddp_tensor* hone = nullptr;
  ASSERT_EQ(ddp_tensor_from_aten(&hone, &one), DDP_OK);
  EXPECT_EQ(ddp_strategy_batch_norm(s.get(), hone, hw, nullptr, hrm, hrv, 1, 0.1, 1e-5, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_TRUE(has(last(), "more than 1 value per channel")) << last();
  EXPECT_TRUE(torch::equal(rm, torch::zeros({3})));  // nothing moved
  // Bound in a model, the layer trains through the strategy (one rank: BatchNorm).
  ddp::SyncBatchNorm bn(torch::nn::BatchNormOptions(3));
  torch::nn::BatchNorm1d plain(torch::nn::BatchNormOptions(3));
  EXPECT_EQ(ddp::bind_sync_batchnorm(*bn, s.get()), 1);
  auto xx = torch::randn({5, 3});
  EXPECT_TRUE(torch::allclose(bn->forward(xx), plain->forward(xx), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(bn->running_var, plain->running_var, 1e-5, 1e-6));
  for (ddp_tensor* h : {hx, hw, hwrong, hrm, hrv, hone}) ddp_tensor_free(h);
}

}  // namespace
