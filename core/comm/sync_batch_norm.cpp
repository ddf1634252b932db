#include "comm/sync_batch_norm.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "comm/batch_norm_kernels.h"
#include "comm/collectives.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// A per-channel vector shaped to broadcast against x: (1, C, 1, ...).
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
  shape[1] = v.numel();
  return v.view(shape);
}

// The statistics of the group's batch. The per-channel arithmetic is done
// on the host in float64 (C numbers, a few loops: cheaper than a dozen tiny
// tensor ops); the tensors the kernels take are in stats_type(x), on x's device.
struct GlobalStats {
  std::vector<double> mean, var;  // var: biased
  double count = 0;               // values per channel over the group
  at::Tensor mean_t, var_t;       // (C)
};

at::ScalarType stats_type(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat; }

// Host numbers as a tensor of `dtype` on `device`. On the CPU the numbers
// are written in place: a tensor op per vector would cost more than the
// arithmetic (these are C numbers per layer and step).
at::Tensor to_device(const std::vector<double>& v, at::Device device, at::ScalarType dtype) {
  at::Tensor t = at::empty({static_cast<int64_t>(v.size())}, at::TensorOptions().dtype(
                                                                   device.is_cpu() ? dtype : at::kDouble));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t.scalar_type(), "sync_batch_norm_to_device", [&] {
    auto* p = t.data_ptr<scalar_t>();
    for (size_t i = 0; i < v.size(); ++i) p[i] = static_cast<scalar_t>(v[i]);
  });
  return device.is_cpu() ? t : t.to(device, dtype);
}
at::Tensor to_device(const std::vector<double>& v, const at::Tensor& like) {
  return to_device(v, like.device(), stats_type(like));
}

std::vector<double> to_host(const at::Tensor& t) {
  at::Tensor h = t.is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous();
  std::vector<double> out(static_cast<size_t>(h.numel()));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, h.scalar_type(), "sync_batch_norm_to_host", [&] {
    const auto* p = h.data_ptr<scalar_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<double>(p[i]);
  });
  return out;
}

// This rank's count, per-channel mean and sum of squared deviations, in
// one float64 vector: (count, mean[C], m2[C]).
at::Tensor local_stats(const at::Tensor& x) {
  const int64_t channels = x.size(1);
  const int64_t local_count = x.numel() == 0 ? 0 : x.numel() / channels;
  at::Tensor mine = at::empty({2 * channels + 1}, at::TensorOptions().dtype(at::kDouble));
  double* m = mine.data_ptr<double>();
  m[0] = static_cast<double>(local_count);
  if (bn_kernels::applies(x)) {
    bn_kernels::moments(x, m + 1, m + 1 + channels);
    return mine;
  }
  std::fill(m + 1, m + 1 + 2 * channels, 0.0);
  if (local_count > 0) {
    // batch_norm's own statistics kernel (mean and biased variance, one
    // pass): over 10x faster than var_mean's strided reduction here.
    auto [mean, var] = at::batch_norm_update_stats(x, {}, {}, 0.0);
    auto mean_h = to_host(mean), var_h = to_host(var);
    for (int64_t c = 0; c < channels; ++c) {
      m[1 + c] = mean_h[c];
      m[1 + channels + c] = var_h[c] * static_cast<double>(local_count);
    }
  }
  return mine;
}

GlobalStats gather_stats(Group& g, const at::Tensor& x) {
  const int64_t channels = x.size(1);
  // Chan's combination: (world, 2C + 1) numbers.
  at::Tensor all = all_gather_blocking(g, local_stats(x).to(x.device())).to(at::kCPU).contiguous();
  const double* a = all.data_ptr<double>();
  const int64_t world = all.size(0), row = 2 * channels + 1;
  GlobalStats s;
  for (int64_t r = 0; r < world; ++r) s.count += a[r * row];
  if (s.count <= 1)
    fail(Status::InvalidArgument, "sync_batchnorm: expected more than 1 value per channel when training, got " +
                                      std::to_string(static_cast<int64_t>(s.count)) + " over the group");
  s.mean.resize(channels);
  s.var.resize(channels);
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0;
    for (int64_t r = 0; r < world; ++r) mean += a[r * row] * a[r * row + 1 + c];
    mean /= s.count;
    double m2 = 0;
    for (int64_t r = 0; r < world; ++r) {
      double d = a[r * row + 1 + c] - mean;
      m2 += a[r * row + 1 + channels + c] + a[r * row] * d * d;
    }
    s.mean[c] = mean;
    s.var[c] = m2 / s.count;
  }
  if (!bn_kernels::applies(x)) {  // ATen's kernels take the statistics as tensors
    s.mean_t = to_device(s.mean, x);
    s.var_t = to_device(s.var, x);
  }
  return s;
}

// batch_norm's update of a running statistic: momentum * now + (1 - momentum) * running.
void update_running(const at::Tensor& running, const std::vector<double>& now, double momentum) {
  if (!running.defined()) return;
  auto old = to_host(running);
  for (size_t c = 0; c < old.size(); ++c) old[c] = momentum * now[c] + (1 - momentum) * old[c];
  if (!bn_kernels::write(running, old)) running.copy_(to_device(old, running.device(), running.scalar_type()));
}

// The backward of one synchronised batch norm: holds what it needs, and the
// group, for as long as the graph holds it.
struct SyncBatchNormBackward : public torch::autograd::Node {
  std::shared_ptr<Group> group;
  at::Tensor x, weight, mean_t, var_t;  // mean_t, var_t: ATen's path only
  std::vector<double> mean, invstd, scale;  // scale: invstd * weight (invstd without a weight)
  double eps = 0, count = 0;
  bool has_bias = false;

  // Per channel: sum(dy) and sum(dy * (x - mean)) of this rank, and the
  // input's gradient from the group's totals of both. (A rank without rows
  // has zeros: ATen's kernel would divide by its zero count.)
  struct LocalGrads {
    std::vector<double> sum_dy, sum_dy_xmu;
    at::Tensor dx;  // ATen's path: dy * scale, to which the rest is added
  };
  LocalGrads local_sums(const at::Tensor& dy) {
    const int64_t channels = x.size(1);
    LocalGrads l;
    l.sum_dy.resize(channels);
    l.sum_dy_xmu.resize(channels);
    if (bn_kernels::applies(x)) {
      bn_kernels::grad_sums(dy, x, mean, l.sum_dy.data(), l.sum_dy_xmu.data());
      return l;
    }
    if (x.numel() == 0) {
      l.dx = at::zeros_like(x);
      return l;
    }
    // One fused pass: dy * invstd * weight, sum(dy * (x - mean)) * invstd and sum(dy).
    // Empty saved statistics (not undefined ones): CUDA's kernel asserts
    // they are defined, and takes the running ones (here the synchronised
    // mean and variance) when they are empty; the CPU kernel ignores them.
    at::Tensor dxhat_sum, dy_sum, none = at::empty({0}, mean_t.options());
    std::tie(l.dx, dxhat_sum, dy_sum) = at::native_batch_norm_backward(dy, x, weight, mean_t, var_t, none, none,
                                                                       /*train=*/false, eps, {true, true, true});
    auto dy_sum_h = to_host(dy_sum), dxhat_sum_h = to_host(dxhat_sum);
    for (int64_t c = 0; c < channels; ++c) {
      l.sum_dy[c] = dy_sum_h[c];
      l.sum_dy_xmu[c] = dxhat_sum_h[c] / invstd[c];
    }
    return l;
  }

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    at::Tensor dy = grads[0].defined() ? grads[0].to(x.scalar_type()).contiguous() : at::zeros_like(x);
    const int64_t channels = x.size(1);
    LocalGrads l = local_sums(dy);
    // The weight's and bias's gradients stay this rank's own (DDP averages them).
    std::vector<double> grad_w(channels);
    for (int64_t c = 0; c < channels; ++c) grad_w[c] = l.sum_dy_xmu[c] * invstd[c];
    at::Tensor grad_weight, grad_bias;
    if (weight.defined()) grad_weight = to_device(grad_w, weight.device(), weight.scalar_type());
    if (has_bias)
      grad_bias = to_device(l.sum_dy, x.device(), weight.defined() ? weight.scalar_type() : x.scalar_type());
    // The two sums SyncBatchNorm reduces over the group.
    at::Tensor sums = at::empty({2 * channels}, at::TensorOptions().dtype(at::kDouble));
    double* s = sums.data_ptr<double>();
    std::copy(l.sum_dy.begin(), l.sum_dy.end(), s);
    std::copy(l.sum_dy_xmu.begin(), l.sum_dy_xmu.end(), s + channels);
    sums = sums.to(x.device());
    all_reduce_blocking(*group, sums, ReduceOp::Sum);
    auto total = to_host(sums);
    // dx = (dy - mean(dy) - (x - mean) * invstd^2 * mean(dy * (x - mean))) * invstd * weight
    std::vector<double> mean_dy(channels), k(channels);
    for (int64_t c = 0; c < channels; ++c) {
      mean_dy[c] = total[c] / count;
      k[c] = invstd[c] * invstd[c] * total[channels + c] / count;
    }
    at::Tensor dx;
    if (bn_kernels::applies(x)) {
      dx = bn_kernels::grad_input(dy, x, mean, mean_dy, k, scale);
    } else {
      // ATen's dx holds dy * scale: add x * b + c per channel.
      std::vector<double> b(channels), cc(channels);
      for (int64_t c = 0; c < channels; ++c) {
        b[c] = -k[c] * scale[c];
        cc[c] = (mean[c] * k[c] - mean_dy[c]) * scale[c];
      }
      dx = l.dx.addcmul_(x, per_channel(to_device(b, x.device(), x.scalar_type()), x))
               .add_(per_channel(to_device(cc, x.device(), x.scalar_type()), x));
    }
    return {dx, grad_weight, grad_bias};
  }
  std::string name() const override { return "ddp::SyncBatchNormBackward"; }
  void release_variables() override {
    x.reset();
    weight.reset();
    mean_t.reset();
    var_t.reset();
  }
};

}  // namespace

at::Tensor sync_batch_norm(const std::shared_ptr<Group>& g, const at::Tensor& input, const at::Tensor& weight,
                           const at::Tensor& bias, const at::Tensor& running_mean, const at::Tensor& running_var,
                           double momentum, double eps) {
  check_arg(input.dim() >= 2, "sync_batchnorm: the input has " + std::to_string(input.dim()) +
                                  " dimensions; batch norm needs (N, C, ...)");
  at::Tensor x = input.detach().contiguous();
  const int64_t channels = x.size(1);
  GlobalStats s = gather_stats(*g, x);
  std::vector<double> invstd(channels), scale(channels);
  std::vector<double> weight_h = weight.defined() ? to_host(weight.detach()) : std::vector<double>();
  for (int64_t c = 0; c < channels; ++c) {
    invstd[c] = 1.0 / std::sqrt(s.var[c] + eps);
    scale[c] = invstd[c] * (weight_h.empty() ? 1.0 : weight_h[c]);
  }
  at::Tensor y;
  {
    at::NoGradGuard no_grad;
    if (running_mean.defined() || running_var.defined()) {
      std::vector<double> unbiased(s.var);
      for (double& v : unbiased) v *= s.count / (s.count - 1);
      update_running(running_mean, s.mean, momentum);
      update_running(running_var, unbiased, momentum);
    }
    if (bn_kernels::applies(x)) {
      std::vector<double> bias_h = bias.defined() ? to_host(bias.detach()) : std::vector<double>(channels, 0.0);
      std::vector<double> shift(channels);
      for (int64_t c = 0; c < channels; ++c) shift[c] = bias_h[c] - s.mean[c] * scale[c];
      y = bn_kernels::scale_shift(x, scale, shift);
    } else {
      // Normalising with given statistics is batch_norm's eval kernel: one fused pass.
      at::Tensor w = weight.defined() ? weight.detach() : at::Tensor();
      at::Tensor b = bias.defined() ? bias.detach() : at::Tensor();
      y = x.numel() > 0 ? at::batch_norm(x, w, b, s.mean_t, s.var_t, /*training=*/false, 0.0, eps, /*cudnn_enabled=*/true)
                        : at::empty_like(x);
    }
  }
  bool needs_grad = at::GradMode::is_enabled() && (input.requires_grad() || (weight.defined() && weight.requires_grad()) ||
                                                   (bias.defined() && bias.requires_grad()));
  if (!needs_grad) return y;
  auto node = std::shared_ptr<SyncBatchNormBackward>(new SyncBatchNormBackward(), torch::autograd::deleteNode);
  node->group = g;
  node->x = x;
  node->weight = weight.defined() ? weight.detach() : at::Tensor();
  node->mean_t = s.mean_t;
  node->var_t = s.var_t;
  node->mean = std::move(s.mean);
  node->invstd = std::move(invstd);
  node->scale = std::move(scale);
  node->eps = eps;
  node->count = s.count;
  node->has_bias = bias.defined();
  node->set_next_edges(torch::autograd::collect_next_edges(input, weight, bias));
  torch::autograd::set_history(y, node);
  return y;
}

}  // namespace ddp::core
