// Numerical pieces shared by both PowerSGD hooks.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddp::core::powersgd {

// Orthogonalizes the columns of each matrix of a (batch, n, r) tensor in
// place, as PyTorch's _orthogonalize: Gram-Schmidt for r <= 2 or half
// types (epsilon added to each column norm), reduced QR otherwise.
void orthogonalize(const at::Tensor& matrices, double epsilon);

// Standard-normal tensors drawn as torch.manual_seed(seed) followed by
// torch.randn(shape, device="cpu") calls would draw them, in order; each is
// then moved to the device of `like` (PyTorch draws Q on the CPU too).
class SeededNormal {
 public:
  explicit SeededNormal(uint32_t seed);
  at::Tensor draw(at::IntArrayRef shape, const at::Tensor& like);

 private:
  at::Generator gen_;
};

// PyTorch's _should_compress: worth it when (n + m) * r * rate < n * m.
inline bool should_compress(int64_t n, int64_t m, int64_t r, double min_rate) {
  return double((n + m) * r) * min_rate < double(n * m);
}

}  // namespace ddp::core::powersgd
