// A model written in LibTorch itself under the strategy (issue 30's first
// slice): a torch::nn::Module (Linear, BatchNorm1d, Linear: NormNet of
// tests/surface/surface_model.py, with the same names) handed to the
// strategy with ddp::module_from, its weights read from the state dict
// Python wrote, its own forward between ddp_strategy_forward_begin/_end,
// its own torch::optim::SGD stepped through ddp_strategy_optimizer_step_fn,
// on 2 ranks the strategy starts itself; 10 steps of the Join job's rows,
// then a checkpoint. Prints "rank R step S loss <hex>" and each rank's
// running statistics' sum at the end;
// test_native_parity.py compares with native_reference.py (PyTorch DDP).
//   native_job DIR [PRECISION]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ddp/torch.hpp"

namespace {

constexpr int N = 96, FEATURES = 8, LATENT = 4, REAL = 6, PER_RANK = 8;

struct NormNet : torch::nn::Module {
  torch::nn::Sequential net;
  NormNet()
      : net(register_module("net", torch::nn::Sequential(torch::nn::Linear(LATENT, 8), torch::nn::BatchNorm1d(8),
                                                         torch::nn::Linear(8, REAL)))) {}
  torch::Tensor forward(const torch::Tensor& z) { return net->forward(z); }
};

std::vector<float> read_floats(const std::string& path, size_t n) {
  std::vector<float> v(n);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f || std::fread(v.data(), sizeof(float), n, f) != n) throw std::runtime_error("cannot read " + path);
  std::fclose(f);
  return v;
}

int sgd_step(void* opt) {
  static_cast<torch::optim::SGD*>(opt)->step();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: native_job DIR [PRECISION]\n");
    return 2;
  }
  try {
    const std::string dir = argv[1];
    auto xs = read_floats(dir + "/x.f32", N * FEATURES), zs = read_floats(dir + "/z.f32", N * LATENT);
    ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
    so.devices = 2;
    so.timeout_ms = 60000;
    so.precision = argc > 2 ? argv[2] : nullptr;
    so.state_dict_prefix = "model.";
    ddp_strategy* s = nullptr;
    ddp::check(ddp_strategy_new(&s, &so), "strategy_new");
    ddp::check(ddp_strategy_setup_environment(s), "setup_environment");
    const int rank = ddp_strategy_global_rank(s);

    auto model = std::make_shared<NormNet>();
    ddp_module* m = ddp::module_from(*model);
    ddp::check(ddp_module_load_state_dict(m, (dir + "/norm_state.pt").c_str(), 1), "load_state_dict");
    ddp::check(ddp_strategy_setup_module(s, m), "setup_module");
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
    model->train();
    for (int step = 0; step < 10; ++step) {
      std::vector<float> real(PER_RANK * REAL), z(PER_RANK * LATENT);
      for (int i = 0; i < PER_RANK; ++i) {
        int row = (step * 2 * PER_RANK + rank * PER_RANK + i) % N;
        std::copy_n(xs.begin() + row * FEATURES, REAL, real.begin() + i * REAL);
        std::copy_n(zs.begin() + row * LATENT, LATENT, z.begin() + i * LATENT);
      }
      torch::Tensor tz = torch::from_blob(z.data(), {PER_RANK, LATENT}).clone();
      torch::Tensor target = torch::from_blob(real.data(), {PER_RANK, REAL}).clone();
      ddp::check(ddp_strategy_forward_begin(s, m), "forward_begin");
      torch::Tensor out = model->forward(tz);
      ddp::check(ddp_strategy_forward_end(s), "forward_end");
      torch::Tensor loss = torch::mse_loss(out.to(torch::kFloat), target);
      opt.zero_grad();
      ddp_tensor* l = nullptr;
      ddp::check(ddp_tensor_from_aten(&l, &loss), "loss");
      ddp::check(ddp_strategy_backward(s, l), "backward");
      ddp_tensor_free(l);
      ddp::check(ddp_strategy_optimizer_step_fn(s, sgd_step, &opt, nullptr), "optimizer_step");
      std::printf("rank %d step %d loss %a\n", rank, step, loss.item<double>());
    }
    // Each rank's running statistics: rank 0's broadcast before each forward, then its own batch's.
    double stats = 0;
    for (const auto& b : model->named_buffers())
      if (b.value().is_floating_point()) stats += b.value().sum().item<double>();
    std::printf("rank %d buffers %a\n", rank, stats);
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    info.step = 10;
    ddp::check(ddp_strategy_save_checkpoint_v2(s, (dir + "/native.ckpt").c_str(), m, nullptr, 0, nullptr, 0, &info),
               "save_checkpoint");
    std::fflush(stdout);
    ddp_module_free(m);
    ddp::check(ddp_strategy_teardown(s), "teardown");
    ddp_strategy_free(s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "native_job: %s\n", e.what());
    return 2;
  }
  return 0;
}
