#include "hooks/post_localsgd.h"

#include <ATen/ops/cat.h>

#include "common/error.h"

namespace ddp::core {
namespace {

class PostLocalSgdHook : public CommHook {
 public:
  PostLocalSgdHook(std::shared_ptr<Group> subgroup, int64_t start, bool post_allreduce)
      : subgroup_(std::move(subgroup)), start_(start), post_allreduce_(post_allreduce) {}

  PendingPtr run(Group& group, const BucketView& bucket) override {
    if (iter_ < start_) {
      if (bucket.is_last) ++iter_;  // PyTorch counts steps only before the switch
      return divide_then_sum(group, bucket.flat, group.size());
    }
    if (!post_allreduce_) return completed(group, "post-local SGD (no gradient sync)");
    Group* sub = subgroup_.get();
    if (!sub) {
      if (!own_subgroup_) own_subgroup_ = group.new_subgroup(0);  // one per node, as dist.new_subgroups()
      sub = own_subgroup_.get();
    }
    return divide_then_sum(*sub, bucket.flat, sub->size());
  }

  // The steps counted before the switch to local averaging.
  c10::IValue state_dict() const override {
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("kind", std::string(kKind));
    d.insert("iter", iter_);
    return d;
  }
  void check_state_dict(const c10::IValue& saved) const override {
    if (!saved.isNone()) hook_state_int(hook_state_of(saved, kKind), kKind, "iter");
  }
  void load_state_dict(const c10::IValue& saved) override {
    if (!saved.isNone()) iter_ = hook_state_int(hook_state_of(saved, kKind), kKind, "iter");
  }

 protected:
  const char* stateful_kind() const override { return kKind; }

 private:
  static constexpr const char* kKind = "post-local SGD";
  std::shared_ptr<Group> subgroup_;  // shared: the caller may free its handle first
  std::unique_ptr<Group> own_subgroup_;
  int64_t start_, iter_ = 0;
  bool post_allreduce_;
};

}  // namespace

std::shared_ptr<CommHook> make_post_localsgd_hook(std::shared_ptr<Group> subgroup, int64_t start_localsgd_iter,
                                                  bool post_local_gradient_allreduce) {
  check_arg(start_localsgd_iter >= 0, "start_localsgd_iter " + std::to_string(start_localsgd_iter) + " is negative");
  return std::make_shared<PostLocalSgdHook>(std::move(subgroup), start_localsgd_iter, post_local_gradient_allreduce);
}

ModelAverager::ModelAverager(Group& group, int64_t period, int64_t warmup_steps)
    : group_(group), period_(period), warmup_(warmup_steps) {
  check_arg(period > 0, "model averaging period " + std::to_string(period) + " must be positive");
  check_arg(warmup_steps >= 0, "warmup_steps " + std::to_string(warmup_steps) + " is negative");
}

void ModelAverager::set_steps_taken(int64_t steps) {
  check_arg(steps >= 0, "model averager: step " + std::to_string(steps) + " is negative");
  step_ = steps;
}

void ModelAverager::step(const std::vector<at::Tensor>& params) {
  if (step_ >= warmup_ && (step_ - warmup_) % period_ == 0 && !params.empty()) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& p : params) flat_parts.push_back(p.detach().reshape(-1));
    at::Tensor flat = at::cat(flat_parts);  // mixed dtypes are promoted, as in PyTorch
    divide_then_sum(group_, flat, group_.size())->wait();
    int64_t offset = 0;
    for (const auto& p : params) {
      at::Tensor d = p.detach();
      d.copy_(flat.narrow(0, offset, p.numel()).view_as(p));
      offset += p.numel();
    }
  }
  ++step_;
}

}  // namespace ddp::core