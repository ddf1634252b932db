// One rank of the LibTorch tests: a torch::nn model trained with
// ddp::DistributedDataParallel (autograd hooks, no call from the user), each
// step checked bit for bit against a reference model whose gradients are
// averaged by hand the way PyTorch's reducer does (g * (1/world), SUM).
// Usage: torch_worker <mlp|unused|fp16_hook|bucket_view>   (env from the launcher)
// bucket_view: gradient_as_bucket_view, the gradients set to none once
// (zero_grad(set_to_none)) so that both of PyTorch's paths run: a gradient
// already in its bucket, and one copied in and bound.
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddp/torch.hpp"

namespace {
int failures = 0;
#define TCHECK(cond, ...)                                     \
  do {                                                        \
    if (!(cond)) {                                            \
      ++failures;                                             \
      std::fprintf(stderr, "CHECK(%s) failed: ", #cond);      \
      std::fprintf(stderr, __VA_ARGS__);                      \
      std::fprintf(stderr, "\n");                             \
    }                                                         \
  } while (0)

struct Net : torch::nn::Module {
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, unused{nullptr};
  explicit Net(bool with_unused) {
    a = register_module("a", torch::nn::Linear(32, 128));
    b = register_module("b", torch::nn::Linear(128, 64));
    c = register_module("c", torch::nn::Linear(64, 10));
    if (with_unused) unused = register_module("unused", torch::nn::Linear(8, 8));
  }
  torch::Tensor forward(torch::Tensor x) { return c(torch::relu(b(torch::relu(a(x))))); }
};

void copy_params(Net& from, Net& to) {
  torch::NoGradGuard g;
  auto src = from.parameters(), dst = to.parameters();
  for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
}

void sgd(Net& net, double lr) {
  torch::NoGradGuard g;
  for (auto& p : net.parameters())
    if (p.grad().defined()) p.sub_(p.grad() * lr);
}

void zero_grads(Net& net) {
  for (auto& p : net.parameters())
    if (p.grad().defined()) p.mutable_grad().zero_();
}
}  // namespace

// Lightning's all_gather(sync_grads=True) through the strategy: a loss over
// the whole gathered batch, different on every rank, trains each rank's own
// input with the sum over ranks of its slice's gradient. The reference is
// that sum computed here from every rank's (reproducible) inputs.
int gather_grads() {
  torch::set_num_threads(1);
  ddp_strategy* s = nullptr;
  ddp::check(ddp_strategy_new(&s, nullptr), "ddp_strategy_new");
  ddp::check(ddp_strategy_setup_environment(s), "ddp_strategy_setup_environment");
  int rank = ddp_strategy_global_rank(s), world = ddp_strategy_world_size(s);
  auto input_of = [](int r) { return torch::randn({3, 4}, torch::Generator(at::detail::createCPUGenerator(10 + r))); };
  auto target_of = [world](int r) {
    return torch::randn({world, 3, 4}, torch::Generator(at::detail::createCPUGenerator(50 + r)));
  };
  auto x = input_of(rank).requires_grad_(true);
  ddp_tensor *hx = nullptr, *gathered = nullptr, *target = nullptr, *loss = nullptr;
  ddp::check(ddp_tensor_from_aten(&hx, &x), "ddp_tensor_from_aten");
  at::Tensor t = target_of(rank);
  ddp::check(ddp_tensor_from_aten(&target, &t), "ddp_tensor_from_aten");
  // Without sync_grads the result has no gradient path.
  ddp::check(ddp_strategy_all_gather_v2(s, hx, 0, &gathered), "all_gather_v2 without sync_grads");
  ddp::check(ddp_loss_mse(gathered, target, &loss), "ddp_loss_mse");
  TCHECK(ddp_strategy_backward(s, loss) == DDP_E_INVALID_ARGUMENT, "a loss without a gradient path was accepted");
  ddp_tensor_free(loss);
  ddp_tensor_free(gathered);
  ddp::check(ddp_strategy_all_gather_v2(s, hx, 1, &gathered), "all_gather_v2");
  ddp::check(ddp_loss_mse(gathered, target, &loss), "ddp_loss_mse");
  ddp::check(ddp_strategy_backward(s, loss), "ddp_strategy_backward");

  std::vector<at::Tensor> xs;
  for (int r = 0; r < world; ++r) xs.push_back(input_of(r).requires_grad_(true));
  auto all = torch::stack(xs);
  TCHECK(torch::equal(all.detach().flatten(), torch::from_blob(ddp_tensor_data(gathered), {world * 12})),
         "the gathered values differ");
  at::Tensor total = torch::zeros({});
  for (int r = 0; r < world; ++r) total = total + torch::mse_loss(all, target_of(r));
  total.backward();
  TCHECK(x.grad().defined(), "no gradient reached this rank's input");
  TCHECK(torch::allclose(x.grad(), xs[rank].grad(), 1e-5, 1e-7), "rank %d: gradient %s, want %s", rank,
         c10::str(x.grad()).c_str(), c10::str(xs[rank].grad()).c_str());
  // Not the local gradient alone (what a gather without sync would give).
  auto own = input_of(rank).requires_grad_(true);
  std::vector<at::Tensor> local = xs;
  for (auto& v : local) v = v.detach();
  local[rank] = own;
  torch::mse_loss(torch::stack(local), target_of(rank)).backward();
  TCHECK(!torch::allclose(x.grad(), own.grad(), 1e-3, 1e-5), "the gradient is only this rank's own");
  // For tests/parity/test_gather_grads_parity.py: this rank's input gradient, raw float32.
  if (const char* dir = std::getenv("GATHER_GRAD_OUT")) {
    std::string path = std::string(dir) + "/rank" + std::to_string(rank) + ".f32";
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
      at::Tensor g = x.grad().contiguous();
      std::fwrite(g.data_ptr<float>(), sizeof(float), static_cast<size_t>(g.numel()), f);
      std::fclose(f);
    }
  }
  for (ddp_tensor* h : {hx, gathered, target, loss}) ddp_tensor_free(h);
  ddp::check(ddp_strategy_teardown(s), "ddp_strategy_teardown");
  ddp_strategy_free(s);
  return failures == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "mlp";
  if (mode == "gather_grads") return gather_grads();
  bool with_unused = mode == "unused";
  bool fp16_hook = mode == "fp16_hook";  // PyTorch's fp16_compress_hook through register_comm_hook
  bool bucket_view = mode == "bucket_view";
  torch::set_num_threads(1);
  ddp_group* group = nullptr;
  ddp::check(ddp_group_init(&group, nullptr, nullptr), "ddp_group_init");
  int rank = ddp_group_rank(group), world = ddp_group_size(group);

  torch::manual_seed(0);
  Net model(with_unused), reference(with_unused);
  copy_params(model, reference);
  if (rank == 1) {  // the reducer's broadcast must bring rank 0's weights
    torch::NoGradGuard g;
    for (auto& p : model.parameters()) p.add_(1.0);
  }
  ddp_reducer_options opts = DDP_REDUCER_OPTIONS_INIT;
  opts.first_bucket_mb = 0.01;
  opts.bucket_cap_mb = 0.02;
  opts.find_unused_parameters = with_unused;
  opts.gradient_as_bucket_view = bucket_view;
  auto stats = torch::full({3}, static_cast<float>(rank + 5));  // a module buffer
  ddp::DistributedDataParallel ddp_model(group, model.parameters(), opts, {stats});
  TCHECK(stats[0].item<float>() == 5.0f, "buffer not broadcast from rank 0: %g", stats[0].item<float>());
  if (fp16_hook) {
    ddp_comm_hook* h = nullptr;
    ddp::check(ddp_comm_hook_fp16_compress(&h), "ddp_comm_hook_fp16_compress");
    ddp_model.register_comm_hook(h);
    ddp_comm_hook_free(h);
  }
  TCHECK(ddp_reducer_bucket_count(ddp_model.reducer()) >= 2, "buckets %zu", ddp_reducer_bucket_count(ddp_model.reducer()));

  // Bit for bit on 2 ranks, where a + b is the whole sum. On more ranks
  // gloo's ring sums each element in an order that depends on where it sits
  // in the buffer, and the reference reduces per parameter while the reducer
  // reduces whole buckets: the last bits may differ (PyTorch DDP vs a manual
  // all_reduce differ the same way), so compare to float precision.
  // With the fp16 hook the sums are float16 ones: on more than 2 ranks
  // their order shows at float16 precision.
  auto same = [world, fp16_hook](const at::Tensor& a, const at::Tensor& b) {
    if (world == 2) return torch::equal(a, b);
    return fp16_hook ? torch::allclose(a, b, 2e-3, 1e-4) : torch::allclose(a, b, 1e-5, 1e-7);
  };
  auto inv = c10::scalar_to_tensor(at::Scalar(1.0 / world));
  inv.unsafeGetTensorImpl()->set_wrapped_number(true);
  torch::manual_seed(100 + rank);
  for (int step = 0; step < 12; ++step) {
    auto x = torch::randn({16, 32});
    auto y = torch::randint(0, 10, {16});
    bool sync = step != 4 && step != 5;  // two no_sync steps accumulate
    auto loss_ref = torch::nn::functional::cross_entropy(reference.forward(x), y);
    loss_ref.backward();
    if (sync) {
      for (auto& p : reference.parameters()) {
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        torch::NoGradGuard g;
        // PyTorch's reducer: multiply by 1/world, SUM; its fp16 hook: cast,
        // divide, SUM in float16, cast back.
        at::Tensor reduced = fp16_hook ? p.grad().to(torch::kHalf).div_(world) : p.mutable_grad().mul_(inv);
        ddp_tensor* h = nullptr;
        ddp::check(ddp_tensor_from_aten(&h, &reduced), "from_aten");
        ddp::check(ddp_all_reduce(group, h, DDP_SUM), "reference all_reduce");
        ddp_tensor_free(h);
        if (fp16_hook) p.mutable_grad().copy_(reduced);
      }
    }
    auto loss = torch::nn::functional::cross_entropy(model.forward(x), y);
    if (sync) {
      loss.backward();  // the hooks average the gradients
    } else {
      auto guard = ddp_model.no_sync();
      loss.backward();
    }
    if (!sync) continue;
    auto mp = model.parameters(), rp = reference.parameters();
    for (size_t i = 0; i < mp.size(); ++i) {
      auto g1 = mp[i].grad().defined() ? mp[i].grad() : torch::zeros_like(mp[i]);
      auto g2 = rp[i].grad();
      TCHECK(same(g1, g2), "step %d param %zu: max |diff| %g", step, i, (g1 - g2).abs().max().item<double>());
      if (bucket_view) {
        ddp_tensor* view = nullptr;
        ddp::check(ddp_reducer_gradient(ddp_model.reducer(), i, &view), "ddp_reducer_gradient");
        TCHECK(ddp_tensor_data(view) == mp[i].grad().data_ptr(), "step %d param %zu: grad is not its bucket view", step,
               i);
        ddp_tensor_free(view);
      }
    }
    sgd(model, 0.05);
    sgd(reference, 0.05);
    if (bucket_view && step == 7)  // as zero_grad(set_to_none=True): the next step copies and binds again
      for (auto& p : model.parameters()) p.mutable_grad() = at::Tensor();
    zero_grads(model);
    zero_grads(reference);
  }
  auto mp = model.parameters(), rp = reference.parameters();
  for (size_t i = 0; i < mp.size(); ++i) TCHECK(same(mp[i], rp[i]), "final param %zu differs", i);
  std::printf("[rank %d] %s: %d failures\n", rank, mode.c_str(), failures);
  ddp_group_free(group);
  return failures ? 1 : 0;
}
