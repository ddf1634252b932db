#include "comm/all_gather_grad.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "comm/collectives.h"

namespace ddp::core {
namespace {

// The backward node of the gathered tensor. It keeps the group alive for as
// long as the graph holds it.
struct AllGatherBackward : public torch::autograd::Node {
  AllGatherBackward(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    // Every rank takes part in the all-reduce, also one whose loss did not
    // reach the gathered tensor (its gradient is then zero).
    at::Tensor sum = grads[0].defined() ? grads[0].contiguous().clone()
                                        : at::zeros(shape_, at::TensorOptions().dtype(dtype_).device(device_));
    all_reduce_blocking(*group_, sum, ReduceOp::Sum);
    return {sum.select(0, rank_)};
  }
  std::string name() const override { return "ddp::AllGatherBackward"; }

  std::vector<int64_t> shape_;
  at::ScalarType dtype_ = at::kFloat;
  at::Device device_ = at::kCPU;

 private:
  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

at::Tensor all_gather_with_grad(const std::shared_ptr<Group>& g, const at::Tensor& in) {
  at::Tensor out = all_gather_blocking(*g, in.detach());
  if (!in.requires_grad() || !at::GradMode::is_enabled()) return out;
  auto node = std::shared_ptr<AllGatherBackward>(new AllGatherBackward(g, g->rank()), torch::autograd::deleteNode);
  node->shape_ = out.sizes().vec();
  node->dtype_ = out.scalar_type();
  node->device_ = out.device();
  node->set_next_edges(torch::autograd::collect_next_edges(in));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace ddp::core
