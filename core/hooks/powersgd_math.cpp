#include "hooks/powersgd_math.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/linalg_qr.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/sum.h>

namespace ddp::core::powersgd {

void orthogonalize(const at::Tensor& matrices, double epsilon) {
  const int64_t r = matrices.size(2);
  const bool half = matrices.scalar_type() == at::kHalf || matrices.scalar_type() == at::kBFloat16;
  if (r > 2 && !half) {
    auto qr = at::linalg_qr(matrices, "reduced");
    matrices.copy_(std::get<0>(qr));
    return;
  }
  for (int64_t i = 0; i < r; ++i) {
    at::Tensor col = matrices.narrow(2, i, 1);
    at::Tensor norm = at::linalg_vector_norm(col, 2, {1}, /*keepdim=*/true);
    if (epsilon != 0) norm = norm + epsilon;
    col.div_(norm);
    if (i + 1 < r) {
      at::Tensor rest = matrices.narrow(2, i + 1, r - i - 1);
      rest.sub_(at::sum(col * rest, {1}, /*keepdim=*/true) * col);
    }
  }
}

SeededNormal::SeededNormal(uint32_t seed) : gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

at::Tensor SeededNormal::draw(at::IntArrayRef shape, const at::Tensor& like) {
  at::Tensor cpu = at::randn(shape, gen_, at::TensorOptions().dtype(like.scalar_type()));
  return like.is_cpu() ? cpu : cpu.to(like.device());
}

}  // namespace ddp::core::powersgd
