/**
 * @file torch_nn.hpp
 * @brief Header-only for models written with torch::nn: ddp::SyncBatchNorm,
 *        torch.nn.SyncBatchNorm for a C++ module under ddp::Strategy.
 *
 * Lightning's sync_batchnorm rewrites a Python model's BatchNorm layers; a
 * C++ model calls its layers through typed fields (`bn->forward(x)`), which
 * no library can swap after the fact. So the model names the layer itself,
 * with BatchNorm's options and BatchNorm's parameter and buffer names (a
 * state_dict PyTorch's BatchNorm and SyncBatchNorm load):
 *
 *   struct Net : torch::nn::Module {
 *     torch::nn::Conv2d conv{nullptr};
 *     ddp::SyncBatchNorm bn{nullptr};     // was torch::nn::BatchNorm2d
 *     Net() { conv = register_module("conv", torch::nn::Conv2d(1, 16, 3));
 *             bn = register_module("bn", ddp::SyncBatchNorm(torch::nn::BatchNormOptions(16))); }
 *   };
 *   ddp::Strategy strategy;  ...  ddp::bind_sync_batchnorm(*net, strategy.get());
 *
 * Bound to a strategy, training normalises with the statistics of the
 * global batch over its group (ddp_strategy_batch_norm: collective, every
 * rank runs the same layers in the same order); unbound, or in eval, it is
 * torch::nn::BatchNorm. Not stable ABI, as torch.hpp.
 */
#ifndef DDP_TORCH_NN_HPP
#define DDP_TORCH_NN_HPP

#include <torch/nn/cloneable.h>
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/module.h>
#include <torch/nn/options/batchnorm.h>
#include <torch/nn/pimpl.h>

#include <memory>

#include "ddp/torch.hpp"

namespace ddp {

/** BatchNorm1d/2d/3d (the input's rank decides, N x C x ...) synchronised over a strategy's group. */
class SyncBatchNormImpl : public torch::nn::Cloneable<SyncBatchNormImpl> {
 public:
  explicit SyncBatchNormImpl(const torch::nn::BatchNormOptions& options) : options(options) { reset(); }

  void reset() override {
    if (options.affine()) {
      weight = register_parameter("weight", torch::ones({options.num_features()}));
      bias = register_parameter("bias", torch::zeros({options.num_features()}));
    }
    if (options.track_running_stats()) {
      running_mean = register_buffer("running_mean", torch::zeros({options.num_features()}));
      running_var = register_buffer("running_var", torch::ones({options.num_features()}));
      num_batches_tracked = register_buffer("num_batches_tracked", torch::tensor(0, torch::kLong));
    }
  }

  /** The strategy whose group training synchronises over (borrowed; NULL unbinds). */
  void bind(ddp_strategy* strategy) { strategy_ = strategy; }
  ddp_strategy* bound() const { return strategy_; }

  torch::Tensor forward(const torch::Tensor& input) {
    double momentum = options.momentum() ? *options.momentum() : 0.0;
    if (is_training() && options.track_running_stats()) {
      num_batches_tracked.add_(1);
      if (!options.momentum()) momentum = 1.0 / num_batches_tracked.item<double>();  // cumulative average
    }
    const bool batch_stats = is_training() || !options.track_running_stats();
    if (!strategy_ || !batch_stats)
      return torch::nn::functional::detail::batch_norm(input, running_mean, running_var, weight, bias, batch_stats,
                                                       momentum, options.eps());
    struct Handles {
      ddp_tensor* h[6] = {};
      ~Handles() {
        for (ddp_tensor* t : h) ddp_tensor_free(t);
      }
    } hs;
    const torch::Tensor* from[5] = {&input, &weight, &bias, &running_mean, &running_var};
    for (int i = 0; i < 5; ++i)
      if (from[i]->defined()) check(ddp_tensor_from_aten(&hs.h[i], from[i]), "ddp_tensor_from_aten");
    check(ddp_strategy_batch_norm(strategy_, hs.h[0], hs.h[1], hs.h[2], hs.h[3], hs.h[4], 1, momentum, options.eps(),
                                  &hs.h[5]),
          "ddp_strategy_batch_norm");
    torch::Tensor out;
    check(ddp_tensor_to_aten(hs.h[5], &out), "ddp_tensor_to_aten");
    return out;
  }

  torch::nn::BatchNormOptions options;
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  ddp_strategy* strategy_ = nullptr;
};
TORCH_MODULE(SyncBatchNorm);

/** Binds every ddp::SyncBatchNorm in @p module's tree to @p strategy (NULL unbinds). @return how many. */
inline int bind_sync_batchnorm(torch::nn::Module& module, ddp_strategy* strategy) {
  int count = 0;
  auto bind = [&](torch::nn::Module* m) {
    if (auto* bn = dynamic_cast<SyncBatchNormImpl*>(m)) {
      bn->bind(strategy);
      ++count;
    }
  };
  bind(&module);  // modules(true) would need the root held by a shared_ptr
  for (const auto& m : module.modules(/*include_self=*/false)) bind(m.get());
  return count;
}

}  // namespace ddp

#endif /* DDP_TORCH_NN_HPP */
