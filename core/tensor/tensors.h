// Tensors for the C API: libddp's dtype and device enums <-> ATen, and the
// two ways a tensor is made (a view of caller memory, or owned storage).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>

#include "ddp/common.h"

namespace ddp {

at::ScalarType to_scalar_type(ddp_dtype dtype);  // throws DDP_E_INVALID_ARGUMENT
ddp_dtype from_scalar_type(at::ScalarType t);     // throws DDP_E_UNSUPPORTED
bool valid_dtype(ddp_dtype dtype);
size_t dtype_size(ddp_dtype dtype);  // 0 for an unknown value
const char* dtype_name(ddp_dtype dtype);
ddp_device device_of(const at::Tensor& t);

// Zero-copy view of caller memory (CPU).
at::Tensor tensor_from_blob(void* data, ddp_dtype dtype, const int64_t* shape, size_t ndim);
// Owned, zero-filled.
at::Tensor tensor_zeros(ddp_dtype dtype, const int64_t* shape, size_t ndim, ddp_device device);
// Host copy of all elements; nbytes must match exactly.
void tensor_copy_to_host(const at::Tensor& t, void* dst, size_t nbytes);
// Fills a contiguous tensor (any device) from host memory; nbytes must match.
void tensor_copy_from_host(const at::Tensor& t, const void* src, size_t nbytes);

}  // namespace ddp
