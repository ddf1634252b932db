// One rank of the LibTorch tests: a torch::nn model trained with
// ddp::DistributedDataParallel (autograd hooks, no call from the user), each
// step checked bit for bit against a reference model whose gradients are
// averaged by hand the way PyTorch's reducer does (g * (1/world), SUM).
// Usage: torch_worker <mlp|unused|fp16_hook|bucket_view|gather_grads|sync_bn_1d|sync_bn_2d|aliased_grads>
//        (env from the launcher)
// bucket_view: gradient_as_bucket_view, the gradients set to none once
// (zero_grad(set_to_none)) so that both of PyTorch's paths run: a gradient
// already in its bucket, and one copied in and bound.
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddp/torch.hpp"
#include "ddp/torch_nn.hpp"

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

// ddp::SyncBatchNorm (torch_nn.hpp) in a torch::nn model under ddp::Strategy:
// per-rank batches of different sizes (on 4 ranks one rank has no rows), two
// training steps, then eval on rank 0 alone. Everything equals one
// torch::nn::BatchNorm on the concatenation of every rank's batch, computed
// here from every rank's (reproducible) inputs: the outputs of this rank's
// rows, its input gradient (of the sum of every rank's loss), the weight and
// bias gradients summed over the ranks, and the running statistics.
int sync_bn(bool two_d) {
  torch::set_num_threads(1);
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.timeout_ms = 20000;
  ddp::Strategy strategy(o);
  const int rank = strategy.global_rank(), world = strategy.world_size();
  const std::vector<int64_t> rows = world == 4 ? std::vector<int64_t>{3, 0, 5, 2} : std::vector<int64_t>{3, 5};
  const int64_t C = 6;
  auto shape = [&](int64_t n) { return two_d ? std::vector<int64_t>{n, C, 2, 3} : std::vector<int64_t>{n, C}; };
  auto input_of = [&](int r, int step) {
    return torch::randn(shape(rows[r]), torch::Generator(at::detail::createCPUGenerator(100 * step + r))) * 3 + 1;
  };
  auto grad_of = [&](int r, int step) {
    return torch::randn(shape(rows[r]), torch::Generator(at::detail::createCPUGenerator(1000 + 100 * step + r)));
  };
  torch::nn::BatchNormOptions opts(C);
  opts.momentum(0.2);
  ddp::SyncBatchNorm bn(opts);
  torch::nn::BatchNorm1d ref1(opts);
  torch::nn::BatchNorm2d ref2(opts);
  torch::nn::Module& ref = two_d ? static_cast<torch::nn::Module&>(*ref2) : static_cast<torch::nn::Module&>(*ref1);
  {
    torch::NoGradGuard g;
    auto w = torch::randn({C}, torch::Generator(at::detail::createCPUGenerator(7)));
    bn->weight.copy_(w);
    bn->bias.copy_(w * 0.5);
    for (auto& p : ref.named_parameters()) p.value().copy_(p.key() == "weight" ? w : w * 0.5);
  }
  // BatchNorm's names, so that PyTorch's BatchNorm loads its state_dict.
  TCHECK(bn->named_parameters().keys() == ref.named_parameters().keys(), "parameter names differ");
  TCHECK(bn->named_buffers().keys() == ref.named_buffers().keys(), "buffer names differ");
  TCHECK(ddp::bind_sync_batchnorm(*bn, strategy.get()) == 1, "the layer was not bound");
  auto run_ref = [&](const torch::Tensor& x) { return two_d ? ref2->forward(x) : ref1->forward(x); };
  for (int step = 0; step < 2; ++step) {
    auto x = input_of(rank, step).requires_grad_(true);
    bn->zero_grad();
    auto y = bn->forward(x);
    (y * grad_of(rank, step)).sum().backward();
    // The reference: one batch norm over every rank's rows.
    std::vector<torch::Tensor> xs, gs;
    for (int r = 0; r < world; ++r) {
      xs.push_back(input_of(r, step));
      gs.push_back(grad_of(r, step));
    }
    auto all = torch::cat(xs).requires_grad_(true);
    ref.zero_grad();
    auto ry = run_ref(all);
    (ry * torch::cat(gs)).sum().backward();
    int64_t first = 0;
    for (int r = 0; r < rank; ++r) first += rows[r];
    auto mine = [&](const torch::Tensor& t) { return t.narrow(0, first, rows[rank]); };
    TCHECK(torch::allclose(y, mine(ry), 1e-5, 1e-5), "step %d: outputs differ", step);
    TCHECK(torch::allclose(x.grad(), mine(all.grad()), 1e-4, 1e-5), "step %d: input gradients differ", step);
    for (auto* name : {"weight", "bias"}) {
      torch::Tensor summed = bn->named_parameters()[name].grad().clone();
      ddp_tensor* h = nullptr;
      ddp::check(ddp_tensor_from_aten(&h, &summed), "from_aten");
      ddp::check(ddp_strategy_reduce(strategy.get(), h, DDP_SUM), "reduce");
      ddp_tensor_free(h);
      TCHECK(torch::allclose(summed, ref.named_parameters()[name].grad(), 1e-4, 1e-4), "step %d: %s gradients differ",
             step, name);
    }
    for (auto* name : {"running_mean", "running_var", "num_batches_tracked"})
      TCHECK(torch::allclose(bn->named_buffers()[name].to(torch::kDouble),
                             ref.named_buffers()[name].to(torch::kDouble), 1e-5, 1e-6),
             "step %d: %s differs", step, name);
  }
  // Eval uses the running statistics and communicates nothing: rank 0 alone.
  if (rank == 0) {
    bn->eval();
    ref.eval();
    auto x = input_of(0, 5);
    TCHECK(torch::allclose(bn->forward(x), run_ref(x), 1e-5, 1e-6), "eval outputs differ");
    bn->train();
  }
  strategy.barrier("after eval");
  // Unbound, the layer is a plain batch norm over this rank's rows.
  ddp::bind_sync_batchnorm(*bn, nullptr);
  if (rows[rank] > 1) {
    torch::nn::BatchNorm1d local(opts);
    auto x = torch::randn({4, C});
    torch::NoGradGuard g;
    local->weight.copy_(bn->weight);
    local->bias.copy_(bn->bias);
    TCHECK(torch::allclose(bn->forward(x), local->forward(x), 1e-6, 1e-6), "an unbound layer is not BatchNorm");
  }
  return failures == 0 ? 0 : 1;
}

// The last rank dies by SIGKILL inside a synchronised batch norm's step,
// before its forward's statistics all-gather ("forward") or after the
// forward, before the backward's all-reduce ("backward"). Every other rank's
// call must end in DDP_E_PEER_FAILED naming the dead rank, well inside the
// 20 s collective timeout; none may hang or take the step.
int sync_bn_killed(const std::string& phase) {
  torch::set_num_threads(1);
  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  o.timeout_ms = 20000;
  ddp::Strategy strategy(o);
  const int rank = strategy.global_rank(), victim = strategy.world_size() - 1;
  ddp::SyncBatchNorm bn(torch::nn::BatchNormOptions(4));
  TCHECK(ddp::bind_sync_batchnorm(*bn, strategy.get()) == 1, "the layer was not bound");
  auto x = torch::randn({3, 4}).requires_grad_(true);
  bn->forward(x).sum().backward();  // one step that every rank takes
  strategy.barrier("before the kill");
  const auto t0 = std::chrono::steady_clock::now();
  try {
    if (rank == victim && phase == "forward") raise(SIGKILL);
    auto y = bn->forward(x);
    if (rank == victim) raise(SIGKILL);  // "backward": the forward passed everywhere
    // Through the strategy, whose call returns the status; a bare
    // y.sum().backward() throws the same failure as a std::exception out of
    // autograd's engine, which carries no status.
    strategy.backward(y.sum());
    TCHECK(false, "rank %d: the %s step went through without rank %d", rank, phase.c_str(), victim);
  } catch (const std::exception& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto* status = dynamic_cast<const ddp::error*>(&e);
    TCHECK(status && status->status == DDP_E_PEER_FAILED, "rank %d: not DDP_E_PEER_FAILED: %s", rank, e.what());
    TCHECK(std::string(e.what()).find("rank " + std::to_string(victim)) != std::string::npos,
           "rank %d: the dead rank is not named: %s", rank, e.what());
    TCHECK(s < 10, "rank %d: the failure took %.1f s", rank, s);
  }
  return failures == 0 ? 0 : 1;
}

// Two parameters whose .grad() the user pointed at the same memory: on shm
// the reducer averages gradients where they lie, and two over the same bytes
// would be reduced into each other. The backward pass fails naming both, on
// every rank, and the next one (gradients apart again) averages as before.
int aliased_grads() {
  torch::set_num_threads(1);
  ddp_group* group = nullptr;
  ddp::check(ddp_group_init(&group, nullptr, nullptr), "ddp_group_init");
  const int rank = ddp_group_rank(group), world = ddp_group_size(group);
  torch::manual_seed(0);
  auto a = torch::nn::Linear(16, 16), b = torch::nn::Linear(16, 16);
  std::vector<at::Tensor> params = a->parameters();
  for (auto& p : b->parameters()) params.push_back(p);
  ddp::DistributedDataParallel ddp_model(group, params);
  torch::manual_seed(10 + rank);  // each rank its own batch
  auto x = torch::randn({4, 16});
  auto loss = [&] { return b(a(x)).sum(); };
  auto backward = [&] {
    try {
      loss().backward();
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  std::string what = backward();  // every parameter has a gradient now
  TCHECK(what.empty(), "the first step failed: %s", what.c_str());
  a->weight.mutable_grad() = b->weight.grad();  // the same tensor
  what = backward();
  TCHECK(what.find("gradients 0 and 2 share memory") != std::string::npos, "aliased gradients were not refused: '%s'",
         what.c_str());
  // Apart again: the next pass averages a's fresh gradient over the ranks,
  // bit for bit what PyTorch's reducer computes (g * (1/world), SUM).
  a->weight.mutable_grad() = torch::zeros_like(a->weight);
  at::Tensor expected = torch::autograd::grad({loss()}, {a->weight})[0] * (1.0 / world);
  ddp_tensor* h = nullptr;
  ddp::check(ddp_tensor_from_aten(&h, &expected), "from_aten");
  ddp::check(ddp_all_reduce(group, h, DDP_SUM), "reference all_reduce");
  ddp_tensor_free(h);
  for (int pass = 0; pass < 2; ++pass) {  // the second sees whether the first finished its step
    a->weight.mutable_grad().zero_();
    what = backward();
    TCHECK(what.empty(), "step %d after the refused one failed: %s", pass + 1, what.c_str());
    TCHECK(torch::equal(a->weight.grad(), expected), "step %d after the refused one did not average: max |diff| %g",
           pass + 1, (a->weight.grad() - expected).abs().max().item<double>());
  }
  ddp_group_free(group);
  return failures ? 1 : 0;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "mlp";
  if (mode == "aliased_grads") return aliased_grads();
  if (mode == "gather_grads") return gather_grads();
  if (mode == "sync_bn_1d" || mode == "sync_bn_2d") return sync_bn(mode == "sync_bn_2d");
  if (mode == "sync_bn_killed_in_forward") return sync_bn_killed("forward");
  if (mode == "sync_bn_killed_in_backward") return sync_bn_killed("backward");
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
