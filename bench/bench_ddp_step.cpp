// DDP step time from C++: a torch::nn model trained with libddp at 2 ranks
// (one process per rank, started by ddprun). Rank 0 prints one JSON line.
//   bench_ddp_step <mlp|conv> <bucket_cap_mb> <overlap|no-overlap|no-comm|sync-only|paired|reduce-only> [steps]
// overlap:    ddp::DistributedDataParallel (autograd hooks: buckets reduce during backward)
// no-overlap: the same reducer fed after backward (mark all, finish): comm after compute
// no-comm:    no reduction at all (compute only), to size the communication
// sync-only:  no reduction, but a barrier after backward: the compute plus
//             the wait for the slower rank that any collective of the step
//             pays, with no bytes moved
// reduce-only: the no-overlap reducer's reduction of the gradients and
//             nothing else (no forward, backward or optimizer): its cost
//             with the caches as the reduction leaves them
// paired:     overlap, no-comm and sync-only steps taken in turn by one
//             process (no-comm and sync-only under no_sync), `steps` of
//             each; one JSON line per kind, with "paired": true. The
//             machine's speed drifts from minute to minute, so kinds timed
//             in separate runs compare different minutes; taken in turn
//             they see the same ones.
// BENCH_BACKEND picks the group's backend (default: libddp's, shm on one host);
// the JSON's impl names it: libddp-c++ (default) or libddp-c++-<backend>.
// BENCH_DEVICE=cuda runs on cuda:LOCAL_RANK (NCCL), each timed step ending in
// a device synchronize; BENCH_BATCH sets the batch (32); BENCH_GRAD_VIEW=1
// turns on gradient_as_bucket_view (impl gets "-grad-view"). Model mlp-large
// (1024-4096-4096-4096-1024-10) is issue 13's CUDA model.
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "ddp/torch.hpp"

namespace {
struct Mlp : torch::nn::Module {  // ~9.4 M parameters
  torch::nn::Sequential net{torch::nn::Linear(1024, 2048), torch::nn::ReLU(), torch::nn::Linear(2048, 2048),
                            torch::nn::ReLU(), torch::nn::Linear(2048, 1536), torch::nn::ReLU(),
                            torch::nn::Linear(1536, 10)};
  Mlp() { register_module("net", net); }
  torch::Tensor forward(torch::Tensor x) { return net->forward(x); }
};

struct MlpLarge : torch::nn::Module {  // ~42 M parameters
  torch::nn::Sequential net{torch::nn::Linear(1024, 4096), torch::nn::ReLU(), torch::nn::Linear(4096, 4096),
                            torch::nn::ReLU(), torch::nn::Linear(4096, 4096), torch::nn::ReLU(),
                            torch::nn::Linear(4096, 1024), torch::nn::ReLU(), torch::nn::Linear(1024, 10)};
  MlpLarge() { register_module("net", net); }
  torch::Tensor forward(torch::Tensor x) { return net->forward(x); }
};

struct Conv : torch::nn::Module {  // a small conv net on 32x32 images
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(3, 32, 3).padding(1)};
  torch::nn::Conv2d c2{torch::nn::Conv2dOptions(32, 64, 3).padding(1)};
  torch::nn::Linear fc{64 * 8 * 8, 10};
  Conv() {
    register_module("c1", c1);
    register_module("c2", c2);
    register_module("fc", fc);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::max_pool2d(torch::relu(c1(x)), 2);
    x = torch::max_pool2d(torch::relu(c2(x)), 2);
    return fc(x.flatten(1));
  }
};
}  // namespace

int main(int argc, char** argv) {
  std::string model_name = argc > 1 ? argv[1] : "mlp";
  double cap = argc > 2 ? std::atof(argv[2]) : 25;
  std::string mode = argc > 3 ? argv[3] : "overlap";
  int steps = argc > 4 ? std::atoi(argv[4]) : 30;
  torch::set_num_threads(1);
  ddp_group* group = nullptr;
  ddp_group_options group_opts = DDP_GROUP_OPTIONS_INIT;
  group_opts.backend = std::getenv("BENCH_BACKEND");
  const char* dev_env = std::getenv("BENCH_DEVICE");
  bool cuda = dev_env && std::string(dev_env) == "cuda";
  const char* lr_env = std::getenv("LOCAL_RANK");
  int local_rank = lr_env ? std::atoi(lr_env) : 0;
  if (cuda) group_opts.device = ddp_device{DDP_DEVICE_CUDA, local_rank};
  const char* batch_env = std::getenv("BENCH_BATCH");
  int64_t batch = batch_env ? std::atoll(batch_env) : 32;
  ddp::check(ddp_group_init(&group, nullptr, &group_opts), "ddp_group_init");
  std::string impl = group_opts.backend ? std::string("libddp-c++-") + ddp_group_backend(group) : "libddp-c++";
  int rank = ddp_group_rank(group);

  torch::manual_seed(0);
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(torch::Tensor)> forward;
  std::vector<int64_t> in_shape;
  if (model_name == "mlp") {
    auto m = std::make_shared<Mlp>();
    module = m;
    forward = [m](torch::Tensor x) { return m->forward(x); };
    in_shape = {batch, 1024};
  } else if (model_name == "mlp-large") {
    auto m = std::make_shared<MlpLarge>();
    module = m;
    forward = [m](torch::Tensor x) { return m->forward(x); };
    in_shape = {batch, 1024};
  } else {
    auto m = std::make_shared<Conv>();
    module = m;
    forward = [m](torch::Tensor x) { return m->forward(x); };
    in_shape = {batch, 3, 32, 32};
  }
  torch::Device device = cuda ? torch::Device(torch::kCUDA, local_rank) : torch::Device(torch::kCPU);
  module->to(device);
  auto params = module->parameters();
  int64_t nparams = 0;
  for (auto& p : params) nparams += p.numel();

  ddp_reducer_options opts = DDP_REDUCER_OPTIONS_INIT;
  opts.bucket_cap_mb = cap;
  // BENCH_GRAD_VIEW=1: gradients live in the buckets (no copy in, no copy back).
  const char* view_env = std::getenv("BENCH_GRAD_VIEW");
  opts.gradient_as_bucket_view = view_env && std::string(view_env) == "1";
  if (opts.gradient_as_bucket_view) impl += "-grad-view";
  std::unique_ptr<ddp::DistributedDataParallel> hooked;
  ddp_reducer* manual = nullptr;
  std::vector<ddp_tensor*> grad_handles;
  const bool paired = mode == "paired";
  if (mode == "overlap" || paired) {
    hooked = std::make_unique<ddp::DistributedDataParallel>(group, params, opts);
  } else if (mode == "no-overlap" || mode == "reduce-only") {
    for (auto& p : params) {
      p.mutable_grad() = torch::zeros_like(p);
      ddp_tensor* h = nullptr;
      ddp::check(ddp_tensor_from_aten(&h, &p.grad()), "from_aten");
      grad_handles.push_back(h);
    }
    opts.broadcast_parameters = 0;
    ddp::check(ddp_reducer_new(&manual, group, nullptr, grad_handles.data(), grad_handles.size(), &opts), "reducer");
  }
  torch::optim::SGD opt(params, torch::optim::SGDOptions(0.01));
  auto x = torch::randn(in_shape, device);
  auto y = torch::randint(0, 10, {in_shape[0]}, torch::TensorOptions().dtype(torch::kLong).device(device));
  // The kinds a step can be; one kind unless paired, which turns through all three.
  std::vector<std::string> kinds = paired ? std::vector<std::string>{"overlap", "no-comm", "sync-only"}
                                          : std::vector<std::string>{mode};
  // Per kind, per phase: the whole step, then forward (with zeroing the
  // gradients), backward (with the reduction), the rest (optimizer).
  enum { kStep, kForward, kBackward, kRest, kPhases };
  std::vector<std::array<std::vector<double>, kPhases>> ms(kinds.size());
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  const int warmup = 3 * static_cast<int>(kinds.size());
  const bool compute = mode != "reduce-only";
  for (int s = 0; s < (steps + 3) * static_cast<int>(kinds.size()); ++s) {
    const size_t kind = s % kinds.size();
    std::optional<ddp::DistributedDataParallel::NoSync> local_only;
    if (paired && kinds[kind] != "overlap") local_only.emplace(hooked->reducer());
    ddp_barrier(group);  // steps start together
    auto t0 = Clock::now();
    for (auto& p : params)
      if (p.grad().defined()) p.mutable_grad().zero_();
    torch::Tensor loss = compute ? torch::nn::functional::cross_entropy(forward(x), y) : torch::Tensor();
    const double forward_ms = since(t0);
    if (compute) loss.backward();
    if (manual) {
      for (size_t i = params.size(); i-- > 0;) ddp::check(ddp_reducer_mark_ready(manual, i), "mark_ready");
      ddp::check(ddp_reducer_finish(manual), "finish");
    }
    if (kinds[kind] == "sync-only") ddp::check(ddp_barrier(group), "barrier");
    const double through_backward_ms = since(t0);
    if (compute) opt.step();
    if (cuda) torch::cuda::synchronize();
    const double step_ms = since(t0);
    if (s < warmup) continue;
    auto& m = ms[kind];
    m[kStep].push_back(step_ms);
    m[kForward].push_back(forward_ms);
    m[kBackward].push_back(through_backward_ms - forward_ms);
    m[kRest].push_back(step_ms - through_backward_ms);
  }
  for (size_t k = 0; k < kinds.size() && rank == 0; ++k) {
    auto& m = ms[k];
    for (auto& v : m) std::sort(v.begin(), v.end());
    auto p50 = [&](int phase) { return m[phase][m[phase].size() / 2]; };
    std::printf("{\"impl\": \"%s\", \"model\": \"%s\", \"params\": %lld, \"bucket_cap_mb\": %g, \"mode\": \"%s\", "
                "\"paired\": %s, \"device\": \"%s\", \"batch\": %lld, \"step_ms_p50\": %.3f, \"step_ms_p90\": %.3f, "
                "\"forward_ms_p50\": %.3f, \"backward_ms_p50\": %.3f, \"optimizer_ms_p50\": %.3f}\n",
                impl.c_str(), model_name.c_str(), (long long)nparams, cap, kinds[k].c_str(), paired ? "true" : "false",
                cuda ? "cuda" : "cpu", (long long)batch, p50(kStep), m[kStep][m[kStep].size() * 9 / 10], p50(kForward),
                p50(kBackward), p50(kRest));
  }
  ddp_reducer_free(manual);
  for (auto* h : grad_handles) ddp_tensor_free(h);
  hooked.reset();
  ddp_group_free(group);
  return 0;
}
