// Tensors for the C API: libddp's dtype and device enums <-> ATen, and the
// two ways a tensor is made (a view of caller memory, or owned storage).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/types.h"

namespace ddp::core {

at::ScalarType to_scalar_type(DType dtype);  // throws Status::InvalidArgument
DType from_scalar_type(at::ScalarType t);     // throws Status::Unsupported
bool valid_dtype(DType dtype);
size_t dtype_size(DType dtype);  // 0 for an unknown value
const char* dtype_name(DType dtype);
Device device_of(const at::Tensor& t);
at::Device to_aten_device(Device d);  // the inverse of device_of

// The shape as a vector; throws Status::InvalidArgument for NULL with ndim
// > 0, more than 64 dimensions, a negative size, or an element count or
// byte size (elements of element_size bytes) that overflows int64.
std::vector<int64_t> checked_shape(const int64_t* shape, size_t ndim, size_t element_size);

// Zero-copy view of caller memory (CPU).
at::Tensor tensor_from_blob(void* data, DType dtype, const int64_t* shape, size_t ndim);
// Whether `t` (or the tensor it views) was made by tensor_from_blob: memory
// that the caller may free, or use again, once the call it passed it to
// returned, whatever that call returned.
bool is_caller_memory(const at::Tensor& t);
// Owned, zero-filled.
at::Tensor tensor_zeros(DType dtype, const int64_t* shape, size_t ndim, Device device);
// Host copy of all elements; nbytes must match exactly.
void tensor_copy_to_host(const at::Tensor& t, void* dst, size_t nbytes);
// Fills a contiguous tensor (any device) from host memory; nbytes must match.
void tensor_copy_from_host(const at::Tensor& t, const void* src, size_t nbytes);

}  // namespace ddp::core