// One rank of the sync_batchnorm tests, on the core strategy: a TorchScript
// model with a batch norm trains one step on this rank's rows (3, 0, 5, 2
// rows on 4 ranks, 3 and 5 on 2), and everything is
// compared with the same model in this process on the whole concatenated
// batch, as one BatchNorm sees it: the output rows, the input's gradient,
// the parameters' gradients (DDP's average times the world), the running
// statistics; then eval (on rank 0 alone: a collective there would time
// out) and, after teardown, a training forward, which must fail by name.
// A model traced in training mode keeps training=True in its graph (its
// batch norm ignores eval(), in PyTorch as here): "traced" skips the eval
// part. "kill": rank 1 dies before the first forward, and every other rank's
// forward must end in DDP_E_PEER_FAILED or DDP_E_TIMEOUT, not in a hang or
// an error of another kind (the status crosses the TorchScript interpreter).
//   sync_batchnorm_worker MODEL.pt 1d|2d EXPECTED_LAYERS [traced|kill]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/script_module.h"
#include "strategy/ddp_strategy.h"

using namespace ddp::core;

namespace {
int failures = 0;
#define CHECK_THAT(cond, ...)                               \
  do {                                                      \
    if (!(cond)) {                                          \
      ++failures;                                           \
      std::fprintf(stderr, "[rank %d] CHECK(%s) failed: ", rank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                    \
      std::fprintf(stderr, "\n");                           \
    }                                                       \
  } while (0)

bool close(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes()) return false;
  if (!a.is_floating_point()) return at::equal(a, b);
  return at::allclose(a, b, 1e-5, 1e-6);
}

// Uneven everywhere; on 4 ranks one has no rows (on 2 that rank would
// leave the other with the whole batch, where local sums are global ones).
int64_t rows_of(int r, int world) {
  static const int64_t four[] = {3, 0, 5, 2}, two[] = {3, 5};
  return world == 2 ? two[r] : four[r % 4];
}
}  // namespace

int main(int argc, char** argv) {
  int rank = -1;
  if (argc != 4 && argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL.pt 1d|2d EXPECTED_LAYERS [TRACED]\n", argv[0]);
    return 2;
  }
  const std::string mode = argc == 5 ? argv[4] : "";
  const bool traced = mode == "traced";
  std::string path = argv[1], kind = argv[2];
  int expected_layers = std::atoi(argv[3]);
  at::set_num_threads(1);
  try {
    StrategyOptions o;
    o.sync_batchnorm = true;
    o.timeout = Millis(5000);
    // "kill": the first collective must be the batch norm's own, inside the graph.
    o.broadcast_buffers = mode != "kill";
    DdpStrategy s(o);
    s.setup_environment();
    rank = s.global_rank();
    const int world = s.world_size();
    auto in_shape = [&](int64_t n) { return kind == "1d" ? std::vector<int64_t>{n, 6} : std::vector<int64_t>{n, 2, 5, 5}; };
    auto out_shape = [&](int64_t n) { return kind == "1d" ? std::vector<int64_t>{n, 4} : std::vector<int64_t>{n, 3, 5, 5}; };
    std::vector<at::Tensor> inputs, targets;
    int64_t offset = 0;
    for (int r = 0; r < world; ++r) {
      inputs.push_back(at::randn(in_shape(rows_of(r, world)), at::detail::createCPUGenerator(100 + r)) * 2 + 0.5);
      targets.push_back(at::randn(out_shape(rows_of(r, world)), at::detail::createCPUGenerator(200 + r)));
      if (r < rank) offset += rows_of(r, world);
    }
    const int64_t mine = rows_of(rank, world);

    auto m = ScriptModule::load(path);
    s.setup_module(*m);
    CHECK_THAT(s.sync_batchnorm_layers() == expected_layers, "%d batch norms converted, expected %d",
               s.sync_batchnorm_layers(), expected_layers);
    auto ref = ScriptModule::load(path);  // the same initial weights, unconverted
    m->train(true);
    ref->train(true);

    if (mode == "kill") {
      if (rank == 1) std::_Exit(7);
      try {
        s.forward(*m, inputs[rank]);
        CHECK_THAT(false, "the forward went on without rank 1");
      } catch (const Error& e) {
        CHECK_THAT(e.status() == Status::PeerFailed || e.status() == Status::Timeout, "status %d: %s",
                   static_cast<int>(e.status()), e.what());
        std::fprintf(stderr, "[rank %d] as expected: %s\n", rank, e.what());
      }
      return failures == 0 ? 0 : 1;
    }
    at::Tensor x = inputs[rank].clone().requires_grad_(true);
    at::Tensor out = s.forward(*m, x);
    s.backward((out - targets[rank]).square().sum());
    at::Tensor xa = at::cat(inputs).requires_grad_(true);
    at::Tensor outa = ref->forward(xa);
    (outa - at::cat(targets)).square().sum().backward();

    CHECK_THAT(close(out, outa.narrow(0, offset, mine)), "the output differs from one BatchNorm's on the whole batch");
    CHECK_THAT(close(x.grad(), xa.grad().narrow(0, offset, mine)), "the input's gradient differs");
    // A bias before a batch norm has a true gradient of 0: what both sides
    // hold is float32 cancellation, so the tolerance is relative to the
    // largest gradient of the model.
    auto params = m->parameters(), ref_params = ref->parameters();
    double scale = 0;
    for (const auto& p : ref_params) scale = std::max(scale, p.grad().abs().max().item<double>());
    for (size_t i = 0; i < params.size(); ++i)
      CHECK_THAT(at::allclose(params[i].grad() * world, ref_params[i].grad(), 1e-5, 1e-5 * scale),
                 "parameter %zu's gradient differs: %s against %s", i, c10::str(params[i].grad() * world).c_str(),
                 c10::str(ref_params[i].grad()).c_str());
    auto buffers = m->buffers(), ref_buffers = ref->buffers();
    CHECK_THAT(buffers.size() == ref_buffers.size(), "%zu buffers against %zu", buffers.size(), ref_buffers.size());
    for (size_t i = 0; i < buffers.size() && i < ref_buffers.size(); ++i)
      CHECK_THAT(close(buffers[i], ref_buffers[i]), "buffer %zu (running statistics) differs", i);

    // Eval normalises with the running statistics and communicates nothing:
    // rank 0 evaluates alone (a collective would time out in 5 s).
    m->train(false);
    ref->train(false);
    if (rank == 0 && !traced)
      CHECK_THAT(close(m->forward(xa.detach()), ref->forward(xa.detach())), "eval output differs");
    s.barrier("after eval");

    // A second training step, with the batch the other way round.
    m->train(true);
    ref->train(true);
    at::Tensor out2 = s.forward(*m, inputs[rank] * -1);
    at::Tensor outa2 = ref->forward(at::cat(inputs) * -1);
    CHECK_THAT(close(out2, outa2.narrow(0, offset, mine)), "the second step's output differs");

    s.teardown();
    try {
      m->forward(inputs[rank]);
      CHECK_THAT(expected_layers == 0, "training after teardown did not fail");
    } catch (const Error& e) {
      CHECK_THAT(e.status() == Status::State && std::string(e.what()).find("torn down") != std::string::npos,
                 "training after teardown: %s", e.what());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] %s\n", rank, e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
