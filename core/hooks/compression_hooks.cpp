#include "hooks/compression_hooks.h"

#include "common/error.h"

namespace ddp::core {
namespace {

const char* name_of(at::ScalarType t) { return t == at::kHalf ? "fp16" : "bf16"; }

class CompressHook : public CommHook {
 public:
  explicit CompressHook(at::ScalarType dtype) : dtype_(dtype) {}
  PendingPtr run(Group& group, const BucketView& bucket) override {
    at::Tensor compressed = bucket.flat.to(dtype_);
    PendingPtr reduce = divide_then_sum(group, compressed, bucket.divisor);
    at::Tensor flat = bucket.flat;
    return then(group, name_of(dtype_), std::move(reduce), [flat, compressed]() mutable { flat.copy_(compressed); });
  }

 private:
  at::ScalarType dtype_;
};

class CompressWrapper : public CommHook {
 public:
  CompressWrapper(at::ScalarType dtype, std::shared_ptr<CommHook> inner) : dtype_(dtype), inner_(std::move(inner)) {}
  PendingPtr run(Group& group, const BucketView& bucket) override {
    BucketView compressed = bucket;
    compressed.flat = bucket.flat.to(dtype_);
    PendingPtr inner = inner_->run(group, compressed);
    at::Tensor flat = bucket.flat, small = compressed.flat;
    return then(group, name_of(dtype_), std::move(inner), [flat, small]() mutable { flat.copy_(small); });
  }
  // The wrapped hook's state is the state.
  c10::IValue state_dict() const override { return inner_->state_dict(); }
  void check_state_dict(const c10::IValue& saved) const override { inner_->check_state_dict(saved); }
  void load_state_dict(const c10::IValue& saved) override { inner_->load_state_dict(saved); }
  void attach(const void* reducer) override { inner_->attach(reducer); }
  void detach(const void* reducer) noexcept override { inner_->detach(reducer); }

 private:
  at::ScalarType dtype_;
  std::shared_ptr<CommHook> inner_;
};

class NoopHook : public CommHook {
 public:
  PendingPtr run(Group& group, const BucketView&) override { return completed(group, "noop hook"); }
};

}  // namespace

std::shared_ptr<CommHook> make_compress_hook(at::ScalarType dtype) {
  check_arg(dtype == at::kHalf || dtype == at::kBFloat16, "compression hooks take fp16 or bf16");
  return std::make_shared<CompressHook>(dtype);
}

std::shared_ptr<CommHook> make_compress_wrapper(at::ScalarType dtype, std::shared_ptr<CommHook> inner) {
  check_arg(dtype == at::kHalf || dtype == at::kBFloat16, "compression wrappers take fp16 or bf16");
  check_arg(inner != nullptr, "compression wrapper: the inner hook is NULL");
  return std::make_shared<CompressWrapper>(dtype, std::move(inner));
}

std::shared_ptr<CommHook> make_noop_hook() { return std::make_shared<NoopHook>(); }

}  // namespace ddp::core