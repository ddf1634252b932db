#include "comm/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <vector>

#include "comm/collectives.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// Every dimension but the channels (1).
std::vector<int64_t> reduced_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast against x: (1, C, 1, ...).
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = v.numel();
  return v.view(shape);
}

struct GlobalStats {
  at::Tensor mean;      // float64, (C)
  at::Tensor var;       // biased, float64, (C)
  double count = 0;     // values per channel over the group
};

GlobalStats gather_stats(Group& g, const at::Tensor& x) {
  const int64_t channels = x.size(1);
  const double local_count = x.numel() == 0 ? 0.0 : static_cast<double>(x.numel() / channels);
  auto f64 = x.options().dtype(at::kDouble);
  at::Tensor mine = at::zeros({2 * channels + 1}, f64);
  mine[0] = local_count;
  if (local_count > 0) {
    auto [var, mean] = at::var_mean(x.to(at::kDouble), reduced_dims(x), /*correction=*/0, /*keepdim=*/false);
    mine.narrow(0, 1, channels).copy_(mean);
    mine.narrow(0, 1 + channels, channels).copy_(var * local_count);  // the sum of squared deviations
  }
  auto p = all_gather(g, mine);
  p->wait();
  at::Tensor all = p->tensors[0];  // (world, 2C + 1)
  at::Tensor counts = all.select(1, 0).unsqueeze(1);
  at::Tensor means = all.narrow(1, 1, channels), m2s = all.narrow(1, 1 + channels, channels);
  GlobalStats s;
  s.count = counts.sum().item<double>();
  if (s.count <= 1)
    fail(Status::InvalidArgument, "sync_batchnorm: expected more than 1 value per channel when training, got " +
                                      std::to_string(static_cast<int64_t>(s.count)) + " over the group");
  s.mean = (counts * means).sum(0) / s.count;
  s.var = (m2s + counts * (means - s.mean).square()).sum(0) / s.count;
  return s;
}

// The backward of one synchronised batch norm: holds what it needs, and the
// group, for as long as the graph holds it.
struct SyncBatchNormBackward : public torch::autograd::Node {
  std::shared_ptr<Group> group;
  at::Tensor x, weight, mean, invstd;  // mean and invstd in x's dtype, (C)
  double count = 0;
  bool has_weight = false, has_bias = false;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::Tensor dy = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(x);
    at::Tensor xmu = x - per_channel(mean, x);
    auto dims = reduced_dims(x);
    const int64_t channels = x.size(1);
    at::Tensor sums = at::empty({2 * channels}, x.options());
    sums.narrow(0, 0, channels).copy_(dy.sum(dims));
    sums.narrow(0, channels, channels).copy_((dy * xmu).sum(dims));
    // The weight's and bias's gradients are this rank's own (DDP averages
    // them); the sums over the group are for the input's gradient.
    at::Tensor grad_weight = has_weight ? sums.narrow(0, channels, channels) * invstd : at::Tensor();
    at::Tensor grad_bias = has_bias ? sums.narrow(0, 0, channels).clone() : at::Tensor();
    all_reduce(*group, sums, ReduceOp::Sum)->wait();
    at::Tensor mean_dy = sums.narrow(0, 0, channels) / count;
    at::Tensor mean_dy_xmu = sums.narrow(0, channels, channels) / count;
    at::Tensor scale = has_weight ? invstd * weight : invstd;
    at::Tensor dx = (dy - per_channel(mean_dy, x) - xmu * per_channel(invstd * invstd * mean_dy_xmu, x)) *
                    per_channel(scale, x);
    return {dx, grad_weight, grad_bias};
  }
  std::string name() const override { return "ddp::SyncBatchNormBackward"; }
  void release_variables() override {
    x.reset();
    weight.reset();
    mean.reset();
    invstd.reset();
  }
};

}  // namespace

at::Tensor sync_batch_norm(const std::shared_ptr<Group>& g, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                           double momentum, double eps) {
  check_arg(input.dim() >= 2, "sync_batchnorm: the input has " + std::to_string(input.dim()) +
                                  " dimensions; batch norm needs (N, C, ...)");
  at::Tensor x = input.detach();
  GlobalStats s = gather_stats(*g, x);
  at::Tensor y;
  at::Tensor mean = s.mean.to(x.scalar_type());
  at::Tensor invstd = (s.var + eps).rsqrt().to(x.scalar_type());
  {
    at::NoGradGuard no_grad;
    if (running_mean.defined())
      running_mean.mul_(1 - momentum).add_(s.mean.to(running_mean.scalar_type()), momentum);
    if (running_var.defined())
      running_var.mul_(1 - momentum).add_((s.var * (s.count / (s.count - 1))).to(running_var.scalar_type()), momentum);
    at::Tensor scale = weight.defined() ? invstd * weight.detach() : invstd;
    y = (x - per_channel(mean, x)) * per_channel(scale, x);
    if (bias.defined()) y = y + per_channel(bias.detach(), x);
  }
  bool needs_grad = at::GradMode::is_enabled() && (input.requires_grad() || (weight.defined() && weight.requires_grad()) ||
                                                   (bias.defined() && bias.requires_grad()));
  if (!needs_grad) return y;
  auto node = std::shared_ptr<SyncBatchNormBackward>(new SyncBatchNormBackward(), torch::autograd::deleteNode);
  node->group = g;
  node->x = x;
  node->weight = weight.defined() ? weight.detach() : at::Tensor();
  node->mean = mean;
  node->invstd = invstd;
  node->count = s.count;
  node->has_weight = weight.defined();
  node->has_bias = bias.defined();
  node->set_next_edges(torch::autograd::collect_next_edges(input, weight, bias));
  torch::autograd::set_history(y, node);
  return y;
}

}  // namespace ddp::core
