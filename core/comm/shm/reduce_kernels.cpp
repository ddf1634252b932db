#include "comm/shm/reduce_kernels.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace ddp::core::shm {
namespace {

template <typename T, typename F>
void apply(void* dst, const void* src, size_t n, F f) {
  T* __restrict__ d = static_cast<T*>(dst);
  const T* __restrict__ s = static_cast<const T*>(src);
  for (size_t i = 0; i < n; ++i) d[i] = f(d[i], s[i]);
}

template <typename T>
void accumulate_typed(ReduceKind op, void* dst, const void* src, size_t n) {
  switch (op) {
    case ReduceKind::Sum: return apply<T>(dst, src, n, [](T a, T b) { return static_cast<T>(a + b); });
    case ReduceKind::Product: return apply<T>(dst, src, n, [](T a, T b) { return static_cast<T>(a * b); });
    case ReduceKind::Min: return apply<T>(dst, src, n, [](T a, T b) { return b < a ? b : a; });
    case ReduceKind::Max: return apply<T>(dst, src, n, [](T a, T b) { return a < b ? b : a; });
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceKind::BitAnd: return apply<T>(dst, src, n, [](T a, T b) { return static_cast<T>(a & b); });
      case ReduceKind::BitOr: return apply<T>(dst, src, n, [](T a, T b) { return static_cast<T>(a | b); });
      case ReduceKind::BitXor: return apply<T>(dst, src, n, [](T a, T b) { return static_cast<T>(a ^ b); });
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

void accumulate(c10::ScalarType type, ReduceKind op, void* dst, const void* src, size_t n) {
  switch (type) {
    case c10::kFloat: return accumulate_typed<float>(op, dst, src, n);
    case c10::kDouble: return accumulate_typed<double>(op, dst, src, n);
    case c10::kHalf: return accumulate_typed<c10::Half>(op, dst, src, n);
    case c10::kBFloat16: return accumulate_typed<c10::BFloat16>(op, dst, src, n);
    case c10::kChar: return accumulate_typed<int8_t>(op, dst, src, n);
    case c10::kByte: return accumulate_typed<uint8_t>(op, dst, src, n);
    case c10::kShort: return accumulate_typed<int16_t>(op, dst, src, n);
    case c10::kInt: return accumulate_typed<int32_t>(op, dst, src, n);
    case c10::kLong: return accumulate_typed<int64_t>(op, dst, src, n);
    default: return;
  }
}

}  // namespace ddp::core::shm
