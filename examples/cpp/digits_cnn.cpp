// A model written in LibTorch's C++ API under Lightning's DDP strategy: a
// small convolutional net with batch norms (synchronised over the ranks:
// ddp::SyncBatchNorm) on the 8x8 digits of examples/digits/export_digits.py,
// trained with its own torch::optim::SGD under ddp::Strategy in bf16-mixed,
// each rank on DistributedSampler's shard. The strategy starts the ranks
// itself (the program is rank 0 and runs itself again for the others).
//   digits_cnn DATA_DIR [--world N] [--epochs E] [--precision P] [--no-sync-batchnorm]
// Prints each epoch's mean loss (rank 0's batches), the held-out accuracy,
// and writes DATA_DIR/cnn.ckpt (torch.load and Lightning open it).
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "ddp/torch.hpp"
#include "ddp/torch_data.hpp"
#include "ddp/torch_nn.hpp"

namespace {

struct DigitsCnn : torch::nn::Module {
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  ddp::SyncBatchNorm bn1{nullptr}, bn2{nullptr};  // torch::nn::BatchNorm2d, synchronised
  torch::nn::Linear fc{nullptr};
  DigitsCnn() {
    conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).padding(1)));
    bn1 = register_module("bn1", ddp::SyncBatchNorm(torch::nn::BatchNormOptions(16)));
    conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).padding(1)));
    bn2 = register_module("bn2", ddp::SyncBatchNorm(torch::nn::BatchNormOptions(32)));
    fc = register_module("fc", torch::nn::Linear(32 * 2 * 2, 10));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(bn1(conv1(x.view({-1, 1, 8, 8})))), 2);  // 16 x 4 x 4
    x = torch::max_pool2d(torch::relu(bn2(conv2(x))), 2);                      // 32 x 2 x 2
    return fc(x.flatten(1));
  }
};

template <typename T>
torch::Tensor read(const std::string& path, torch::ScalarType type, int64_t width) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + path + " (run examples/digits/export_digits.py DIR first)");
  const int64_t bytes = f.tellg();
  std::vector<T> v(static_cast<size_t>(bytes) / sizeof(T));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), bytes);
  return torch::from_blob(v.data(), {static_cast<int64_t>(v.size()) / width, width}, type).clone();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: digits_cnn DATA_DIR [--world N] [--epochs E] [--precision P] [--no-sync-batchnorm]\n");
    return 2;
  }
  const std::string dir = argv[1];
  int world = 2, epochs = 10;
  std::string precision = "bf16-mixed";
  bool sync_bn = true;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--world" && i + 1 < argc) world = std::atoi(argv[++i]);
    else if (a == "--epochs" && i + 1 < argc) epochs = std::atoi(argv[++i]);
    else if (a == "--precision" && i + 1 < argc) precision = argv[++i];
    else if (a == "--no-sync-batchnorm") sync_bn = false;
    else { std::fprintf(stderr, "digits_cnn: unknown argument %s\n", a.c_str()); return 2; }
  }
  try {
    const auto launched = std::chrono::steady_clock::now();
    torch::set_num_threads(1);
    ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
    o.devices = world;
    o.precision = precision.c_str();
    ddp::Strategy strategy(o);
    const int rank = strategy.global_rank();

    torch::manual_seed(0);  // rank 0's initial weights reach every rank at setup anyway
    auto net = std::make_shared<DigitsCnn>();
    strategy.setup(*net);
    if (sync_bn) ddp::bind_sync_batchnorm(*net, strategy.get());
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    strategy.add_optimizer(opt);

    const auto x = read<float>(dir + "/train_x.f32", torch::kFloat, 64);
    const auto y = read<int64_t>(dir + "/train_y.i64", torch::kLong, 1).view(-1);
    ddp::DistributedSampler sampler(static_cast<size_t>(x.size(0)), strategy.world_size(), rank);
    for (int epoch = 0; epoch < epochs; ++epoch) {
      sampler.set_epoch(epoch);
      sampler.reset();
      net->train();
      double loss_sum = 0;
      int batches = 0;
      while (auto idx = sampler.next(32)) {
        auto rows = torch::tensor(std::vector<int64_t>(idx->begin(), idx->end()), torch::kLong);
        auto xb = x.index_select(0, rows), yb = y.index_select(0, rows);
        auto out = strategy.forward(*net, [&] { return net->forward(xb); });
        auto loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), yb);
        opt.zero_grad();
        strategy.backward(loss);
        strategy.optimizer_step(opt);
        loss_sum += loss.item<double>();
        ++batches;
      }
      if (rank == 0) std::printf("epoch %2d  loss %.4f\n", epoch + 1, loss_sum / batches);
    }
    // Evaluation on rank 0 alone: in eval mode the batch norms use their
    // running statistics and nothing is communicated.
    if (rank == 0) {
      const auto tx = read<float>(dir + "/test_x.f32", torch::kFloat, 64);
      const auto ty = read<int64_t>(dir + "/test_y.i64", torch::kLong, 1).view(-1);
      torch::NoGradGuard no_grad;
      net->eval();
      const int64_t right = net->forward(tx).argmax(1).eq(ty).sum().item<int64_t>();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched).count();
      std::printf("held-out accuracy %.4f (%lld of %lld), %d processes, %s, sync_batchnorm %s, %.2f s\n",
                  static_cast<double>(right) / static_cast<double>(ty.size(0)), static_cast<long long>(right),
                  static_cast<long long>(ty.size(0)), strategy.world_size(), precision.c_str(), sync_bn ? "on" : "off",
                  seconds);
    }
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    info.epoch = epochs;
    info.step = static_cast<int64_t>(epochs) * static_cast<int64_t>(sampler.size() + 31) / 32;
    strategy.save_checkpoint(dir + "/cnn.ckpt", info);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "digits_cnn: %s\n", e.what());
    return 1;
  }
  return 0;
}
