// Drives the strategy's precision plugin ("16-mixed": the gradient scaler,
// then clipping, then an SGD step) over a sequence of gradients read from a
// file, and prints what happened at each step, for
// tests/parity/test_precision_parity.py to compare with torch.amp.GradScaler,
// torch.nn.utils.clip_grad_norm_ / clip_grad_value_ and torch.optim.SGD.
//   precision_trace <grads.bin> <none|norm|value> <clip value> <growth interval>
// grads.bin: int64 steps, int64 params, int64 numel[params], then for each
// step each parameter's float32 gradient; the parameters start at 1.0.
// Output: "step <k> scale <s> tracker <t> stepped <0|1>" per step, then
// "param <i> <values as %a>".
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "model/optimizer.h"
#include "precision/precision_plugin.h"

using namespace ddp::core;

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s grads.bin none|norm|value clip_value growth_interval\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  auto read_i64 = [&] {
    int64_t v = 0;
    in.read(reinterpret_cast<char*>(&v), sizeof v);
    return v;
  };
  int64_t steps = read_i64(), nparams = read_i64();
  std::vector<int64_t> numel(nparams);
  for (auto& n : numel) n = read_i64();
  std::vector<at::Tensor> params;
  for (int64_t n : numel) params.push_back(at::ones({n}).set_requires_grad(true));

  GradientClipping clip;
  std::string algo = argv[2];
  clip.value = algo == "none" ? 0 : std::atof(argv[3]);
  clip.algorithm = algo == "value" ? ClipAlgorithm::Value : ClipAlgorithm::Norm;
  GradScalerOptions scaler;
  scaler.growth_interval = std::atoll(argv[4]);
  PrecisionPlugin plugin(resolve_precision("16-mixed", DeviceType::CUDA), clip, scaler);
  plugin.prepare(at::kCPU);
  OptimizerSpec spec;
  spec.lr = 0.5;
  auto opt = Optimizer::make(spec, params);

  for (int64_t k = 0; k < steps; ++k) {
    for (size_t i = 0; i < params.size(); ++i) {
      at::Tensor g = at::empty({numel[i]});
      in.read(static_cast<char*>(g.data_ptr()), numel[i] * sizeof(float));
      params[i].mutable_grad() = g;
    }
    if (!in) {
      std::fprintf(stderr, "%s: short file\n", argv[1]);
      return 2;
    }
    bool stepped = plugin.optimizer_step(opt->parameters(), [&] { opt->step(); });
    std::printf("step %lld scale %a tracker %lld stepped %d\n", static_cast<long long>(k),
                plugin.scaler()->current_scale(), static_cast<long long>(plugin.scaler()->growth_tracker()),
                stepped ? 1 : 0);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    std::printf("param %zu", i);
    auto p = params[i].contiguous();
    for (int64_t j = 0; j < p.numel(); ++j) std::printf(" %a", static_cast<double>(p.data_ptr<float>()[j]));
    std::printf("\n");
  }
  return 0;
}
