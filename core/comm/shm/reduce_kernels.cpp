#include "comm/shm/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ddp::core::shm {
namespace {

// dst may be a itself (accumulate); the compiler checks the other overlaps
// at run time and vectorises.
template <typename T, typename F>
void apply(void* dst, const void* a, const void* b, size_t n, F f) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* __restrict__ y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) d[i] = f(x[i], y[i]);
}

template <typename T>
void combine_typed(ReduceKind op, void* dst, const void* a, const void* b, size_t n) {
  switch (op) {
    case ReduceKind::Sum: return apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x + y); });
    case ReduceKind::Product: return apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x * y); });
    case ReduceKind::Min: return apply<T>(dst, a, b, n, [](T x, T y) { return y < x ? y : x; });
    case ReduceKind::Max: return apply<T>(dst, a, b, n, [](T x, T y) { return x < y ? y : x; });
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceKind::BitAnd: return apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x & y); });
      case ReduceKind::BitOr: return apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x | y); });
      case ReduceKind::BitXor: return apply<T>(dst, a, b, n, [](T x, T y) { return static_cast<T>(x ^ y); });
      default: break;
    }
  }
}

bool is_bitwise(ReduceKind op) {
  return op == ReduceKind::BitAnd || op == ReduceKind::BitOr || op == ReduceKind::BitXor;
}

}  // namespace

bool reduce_supported(c10::ScalarType type, ReduceKind op) {
  switch (type) {
    case c10::kFloat:
    case c10::kDouble:
    case c10::kHalf:
    case c10::kBFloat16: return !is_bitwise(op);
    case c10::kChar:
    case c10::kByte:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong: return true;
    default: return false;
  }
}

void combine(c10::ScalarType type, ReduceKind op, void* dst, const void* a, const void* b, size_t n) {
  switch (type) {
    case c10::kFloat: return combine_typed<float>(op, dst, a, b, n);
    case c10::kDouble: return combine_typed<double>(op, dst, a, b, n);
    case c10::kHalf: return combine_typed<c10::Half>(op, dst, a, b, n);
    case c10::kBFloat16: return combine_typed<c10::BFloat16>(op, dst, a, b, n);
    case c10::kChar: return combine_typed<int8_t>(op, dst, a, b, n);
    case c10::kByte: return combine_typed<uint8_t>(op, dst, a, b, n);
    case c10::kShort: return combine_typed<int16_t>(op, dst, a, b, n);
    case c10::kInt: return combine_typed<int32_t>(op, dst, a, b, n);
    case c10::kLong: return combine_typed<int64_t>(op, dst, a, b, n);
    default: return;
  }
}

void accumulate(c10::ScalarType type, ReduceKind op, void* dst, const void* src, size_t n) {
  combine(type, op, dst, dst, src, n);
}

}  // namespace ddp::core::shm
