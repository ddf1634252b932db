// The element-wise reductions of the shared-memory backend: one place for
// every (dtype, op) it reduces itself. Anything else goes to Gloo.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstddef>

namespace ddp::core::shm {

enum class ReduceKind { Sum, Product, Min, Max, BitAnd, BitOr, BitXor };

// True for the floating types (float, double, half, bfloat16) with sum,
// product, min and max, and the integer types (int8/16/32/64, uint8) with
// all seven.
bool reduce_supported(c10::ScalarType type, ReduceKind op);

// dst[i] = a[i] op b[i] for n elements of `type` (dst may be a). As in
// Gloo, half and bfloat16 are computed in float and rounded after each step.
void combine(c10::ScalarType type, ReduceKind op, void* dst, const void* a, const void* b, size_t n);
// dst[i] = (a[i] * scale) op b[i] for float and double: a gradient scaled
// on its way in (the product rounded to the type, as a bucket holds it)
// and combined with a peer's value in one pass. dst may be a.
void combine_scaled(c10::ScalarType type, ReduceKind op, void* dst, const void* a, double scale, const void* b,
                    size_t n);
// dst[i] = (a[i] * scale) op (b[i] * scale), and dst[i] = dst[i] op
// (src[i] * scale), for float and double: a reduce that scales every
// rank's value as it reads it (each product rounded to the type). dst may
// be a.
void combine_both_scaled(c10::ScalarType type, ReduceKind op, void* dst, const void* a, const void* b, double scale,
                         size_t n);
void accumulate_scaled(c10::ScalarType type, ReduceKind op, void* dst, const void* src, double scale, size_t n);
// dst[i] = dst[i] op src[i].
void accumulate(c10::ScalarType type, ReduceKind op, void* dst, const void* src, size_t n);

}  // namespace ddp::core::shm
