#include "comm/batch_norm_kernels.h"

#include <ATen/ATen.h>

namespace ddp::core::bn_kernels {
namespace {

// x viewed as (N, C, L): L values of channel c follow each other at
// offset (n * C + c) * L. `f(c, offset, L)` is called for every run.
struct Shape {
  int64_t n, c, l;
  explicit Shape(const at::Tensor& x)
      : n(x.size(0)), c(x.size(1)), l(x.numel() == 0 ? 0 : x.numel() / (x.size(0) * x.size(1))) {}
  template <typename F>
  void runs(F&& f) const {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t ch = 0; ch < c; ++ch) f(ch, (i * c + ch) * l);
  }
};

template <typename F>
void dispatch(const at::Tensor& x, F&& f) {
  if (x.scalar_type() == at::kDouble)
    f(double{});
  else
    f(float{});
}

}  // namespace

bool applies(const at::Tensor& x) {
  return x.is_cpu() && x.dim() >= 2 && x.is_contiguous() &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
}

void moments(const at::Tensor& x, double* mean, double* m2) {
  Shape s(x);
  std::fill(mean, mean + s.c, 0.0);
  std::fill(m2, m2 + s.c, 0.0);
  if (s.n * s.l == 0) return;
  const double count = static_cast<double>(s.n * s.l);
  dispatch(x, [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data_ptr<T>();
    s.runs([&](int64_t c, int64_t at) {
      double sum = 0;
      for (int64_t i = 0; i < s.l; ++i) sum += p[at + i];
      mean[c] += sum;
    });
    for (int64_t c = 0; c < s.c; ++c) mean[c] /= count;
    s.runs([&](int64_t c, int64_t at) {
      double sum = 0;
      for (int64_t i = 0; i < s.l; ++i) {
        double d = p[at + i] - mean[c];
        sum += d * d;
      }
      m2[c] += sum;
    });
  });
}

at::Tensor scale_shift(const at::Tensor& x, const std::vector<double>& scale, const std::vector<double>& shift) {
  at::Tensor y = at::empty_like(x, at::MemoryFormat::Contiguous);
  Shape s(x);
  dispatch(x, [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data_ptr<T>();
    T* q = y.data_ptr<T>();
    s.runs([&](int64_t c, int64_t at) {
      const T a = static_cast<T>(scale[c]), b = static_cast<T>(shift[c]);
      for (int64_t i = 0; i < s.l; ++i) q[at + i] = p[at + i] * a + b;
    });
  });
  return y;
}

void grad_sums(const at::Tensor& dy, const at::Tensor& x, const std::vector<double>& mean, double* sum_dy,
               double* sum_dy_xmu) {
  Shape s(x);
  std::fill(sum_dy, sum_dy + s.c, 0.0);
  std::fill(sum_dy_xmu, sum_dy_xmu + s.c, 0.0);
  dispatch(x, [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data_ptr<T>();
    const T* g = dy.data_ptr<T>();
    s.runs([&](int64_t c, int64_t at) {
      double a = 0, b = 0;
      for (int64_t i = 0; i < s.l; ++i) {
        a += g[at + i];
        b += static_cast<double>(g[at + i]) * (p[at + i] - mean[c]);
      }
      sum_dy[c] += a;
      sum_dy_xmu[c] += b;
    });
  });
}

at::Tensor grad_input(const at::Tensor& dy, const at::Tensor& x, const std::vector<double>& mean,
                      const std::vector<double>& mean_dy, const std::vector<double>& k,
                      const std::vector<double>& scale) {
  at::Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  Shape s(x);
  dispatch(x, [&](auto zero) {
    using T = decltype(zero);
    const T* p = x.data_ptr<T>();
    const T* g = dy.data_ptr<T>();
    T* q = dx.data_ptr<T>();
    s.runs([&](int64_t c, int64_t at) {
      const T m = static_cast<T>(mean[c]), mdy = static_cast<T>(mean_dy[c]), kc = static_cast<T>(k[c]),
              sc = static_cast<T>(scale[c]);
      for (int64_t i = 0; i < s.l; ++i) q[at + i] = (g[at + i] - mdy - (p[at + i] - m) * kc) * sc;
    });
  });
  return dx;
}

bool write(const at::Tensor& t, const std::vector<double>& values) {
  if (!t.is_cpu() || !t.is_contiguous() || t.numel() != static_cast<int64_t>(values.size()) ||
      (t.scalar_type() != at::kFloat && t.scalar_type() != at::kDouble))
    return false;
  dispatch(t, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data_ptr<T>();
    for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<T>(values[i]);
  });
  return true;
}

}  // namespace ddp::core::bn_kernels
