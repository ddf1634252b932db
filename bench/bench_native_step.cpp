// One training step of a model written in LibTorch's C++ API, at 2 ranks
// (one process each); rank 0 prints one JSON line with the median and 90th
// percentile step time. Models: "mnist", pytorch/examples' dist-mnist Net
// (conv 1-10-20, dropout, 320-50-10 on 28x28, batch 64, its SGD lr 0.01
// momentum 0.5), and "digits", the digits MLP 64-128-64-10 (batch 32, SGD
// lr 0.05 momentum 0.9); random inputs, the same on every contender.
//   bench_native_step <mnist|digits> [steps]
// Built twice from this file:
//   bench_native_step      ddp::Strategy (torch.hpp): rank facts from the
//                          launcher, the strategy's forward, backward (the
//                          gradients averaged during backward) and step;
//   bench_native_step_mpi  dist-mnist's own loop: after backward, every
//                          gradient MPI_Allreduce'd by hand and divided by
//                          the world size (MPICH, started by mpiexec).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#ifdef DDP_BENCH_MPI
#include <mpi.h>
#else
#include "ddp/torch.hpp"
#endif

namespace {

struct MnistNet : torch::nn::Module {  // pytorch/examples cpp/distributed/dist-mnist.cpp's Model
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 10, 5)}, conv2{torch::nn::Conv2dOptions(10, 20, 5)};
  torch::nn::Dropout2d drop{torch::nn::Dropout2dOptions()};
  torch::nn::Linear fc1{320, 50}, fc2{50, 10};
  MnistNet() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(drop->forward(conv2->forward(x)), 2));
    x = torch::relu(fc1->forward(x.view({-1, 320})));
    x = torch::dropout(x, 0.5, is_training());
    return torch::log_softmax(fc2->forward(x), 1);
  }
};

struct DigitsMlp : torch::nn::Module {  // examples/digits/export_digits.py's MLP
  torch::nn::Linear fc1{64, 128}, fc2{128, 64}, fc3{64, 10};
  DigitsMlp() {
    register_module("fc1", fc1);
    register_module("fc2", fc2);
    register_module("fc3", fc3);
  }
  torch::Tensor forward(torch::Tensor x) {
    return torch::log_softmax(fc3->forward(torch::relu(fc2->forward(torch::relu(fc1->forward(x))))), 1);
  }
};

template <typename Net>
struct Job {
  std::shared_ptr<Net> net = std::make_shared<Net>();
  torch::Tensor x, y;
  double lr, momentum;
};

template <typename Net, typename Step>
std::vector<double> run(Job<Net>& job, int steps, Step&& step) {
  std::vector<double> ms;
  for (int s = 0; s < steps + 5; ++s) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    double el = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s >= 5) ms.push_back(el);
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

template <typename Net>
int bench(const std::string& name, Job<Net> job, int steps) {
  job.net->train();
  torch::optim::SGD opt(job.net->parameters(), torch::optim::SGDOptions(job.lr).momentum(job.momentum));
  int rank = 0;
  std::vector<double> ms;
#ifdef DDP_BENCH_MPI
  const char* impl = "mpi-allreduce-loop";
  int world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  ms = run(job, steps, [&] {
    opt.zero_grad();
    auto loss = torch::nll_loss(job.net->forward(job.x), job.y);
    loss.backward();
    for (auto& p : job.net->parameters()) {  // dist-mnist's averaging, by hand
      MPI_Allreduce(MPI_IN_PLACE, static_cast<float*>(p.grad().data_ptr()), static_cast<int>(p.grad().numel()), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      p.mutable_grad().div_(world);
    }
    opt.step();
  });
#else
  const char* impl = "libddp-strategy-c++";
  ddp::Strategy strategy;
  rank = strategy.global_rank();
  strategy.setup(*job.net);
  strategy.add_optimizer(opt);
  ms = run(job, steps, [&] {
    opt.zero_grad();
    auto out = strategy.forward(*job.net, [&] { return job.net->forward(job.x); });
    auto loss = torch::nll_loss(out, job.y);
    strategy.backward(loss);
    strategy.optimizer_step(opt);
  });
#endif
  if (rank == 0)
    std::printf("{\"impl\": \"%s\", \"model\": \"%s\", \"step_ms_p50\": %.4f, \"step_ms_p90\": %.4f}\n", impl,
                name.c_str(), ms[ms.size() / 2], ms[ms.size() * 9 / 10]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = argc > 1 ? argv[1] : "mnist";
  int steps = argc > 2 ? std::atoi(argv[2]) : 200;
  torch::set_num_threads(1);
  torch::manual_seed(0);
#ifdef DDP_BENCH_MPI
  MPI_Init(&argc, &argv);
#endif
  int rc;
  if (model == "mnist") {
    Job<MnistNet> j;
    j.x = torch::randn({64, 1, 28, 28});
    j.y = torch::randint(0, 10, {64}, torch::kLong);
    j.lr = 0.01, j.momentum = 0.5;
    rc = bench(model, std::move(j), steps);
  } else {
    Job<DigitsMlp> j;
    j.x = torch::rand({32, 64});
    j.y = torch::randint(0, 10, {32}, torch::kLong);
    j.lr = 0.05, j.momentum = 0.9;
    rc = bench(model, std::move(j), steps);
  }
#ifdef DDP_BENCH_MPI
  MPI_Finalize();
#endif
  return rc;
}
