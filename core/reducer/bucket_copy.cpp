#include "reducer/bucket_copy.h"

#include <ATen/ScalarOps.h>
#include <ATen/ops/mul.h>

#include "common/copy_kernel.h"

namespace ddp::core {
namespace {

bool plain_cpu(const at::Tensor& dst, const at::Tensor& src) {
  const auto t = dst.scalar_type();
  return (t == at::kFloat || t == at::kDouble) && src.scalar_type() == t && dst.device().is_cpu() &&
         src.device().is_cpu() && dst.is_contiguous() && src.is_contiguous() && dst.numel() == src.numel() &&
         !dst.is_neg() && !src.is_neg() && !dst.is_conj() && !src.is_conj();
}

}  // namespace

void mark_written(const at::Tensor& dst) { dst.unsafeGetTensorImpl()->bump_version(); }

at::Tensor reciprocal_world(int world) {
  at::Tensor s = c10::scalar_to_tensor(at::Scalar(1.0 / world));
  s.unsafeGetTensorImpl()->set_wrapped_number(true);
  return s;
}

void copy_divided(const at::Tensor& dst, const at::Tensor& src, int world) {
  if (!plain_cpu(dst, src)) {
    at::Tensor out = dst;
    at::mul_out(out, src, reciprocal_world(world));
    return;
  }
  const double f = 1.0 / world;
  if (dst.scalar_type() == at::kFloat)
    copy_scaled(dst.data_ptr<float>(), src.const_data_ptr<float>(), dst.numel(), static_cast<float>(f));
  else
    copy_scaled(dst.data_ptr<double>(), src.const_data_ptr<double>(), dst.numel(), f);
  mark_written(dst);
}

void copy_plain(const at::Tensor& dst, const at::Tensor& src) {
  if (!plain_cpu(dst, src)) {
    at::Tensor out = dst;
    out.copy_(src);
    return;
  }
  if (dst.data_ptr() != src.const_data_ptr())
    copy_bytes(dst.data_ptr(), src.const_data_ptr(), static_cast<size_t>(dst.numel()) * dst.element_size());
  mark_written(dst);
}

}  // namespace ddp::core
