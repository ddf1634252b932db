#include "tensor/tensors.h"

#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/failure.h"
#include "common/cuda_plugin.h"
#include "common/error.h"

namespace ddp::core {
namespace {
struct DtypeInfo {
  DType dtype;
  at::ScalarType scalar;
  size_t size;
  const char* name;
};
constexpr DtypeInfo kDtypes[] = {
    {DType::Float32, at::kFloat, 4, "float32"},  {DType::Float64, at::kDouble, 8, "float64"},
    {DType::Float16, at::kHalf, 2, "float16"},   {DType::BFloat16, at::kBFloat16, 2, "bfloat16"},
    {DType::Int8, at::kChar, 1, "int8"},         {DType::UInt8, at::kByte, 1, "uint8"},
    {DType::Int32, at::kInt, 4, "int32"},        {DType::Int64, at::kLong, 8, "int64"},
    {DType::Bool, at::kBool, 1, "bool"},
};

const DtypeInfo* find(DType d) {
  for (auto& i : kDtypes)
    if (i.dtype == d) return &i;
  return nullptr;
}

}  // namespace

// A shape whose element count or byte size does not fit in int64 would wrap
// (2^62 float32 elements are 0 bytes after the wrap) and reach the backend
// as a small tensor over a huge buffer: refused here, with the numbers.
std::vector<int64_t> checked_shape(const int64_t* shape, size_t ndim, size_t element_size) {
  check_arg(ndim == 0 || shape, "shape is NULL with ndim " + std::to_string(ndim));
  check_arg(ndim <= 64, "ndim " + std::to_string(ndim) + " exceeds 64");
  std::vector<int64_t> s(shape, shape + ndim);
  int64_t numel = 1;
  bool empty = false;
  for (size_t i = 0; i < ndim; ++i) {
    check_arg(s[i] >= 0, "shape[" + std::to_string(i) + "] = " + std::to_string(s[i]) + " is negative");
    empty |= s[i] == 0;
  }
  if (empty) return s;
  for (size_t i = 0; i < ndim; ++i) {
    check_arg(!__builtin_mul_overflow(numel, s[i], &numel),
              "shape: the element count overflows int64 at dimension " + std::to_string(i) + " (size " +
                  std::to_string(s[i]) + ")");
  }
  int64_t bytes = 0;
  check_arg(!__builtin_mul_overflow(numel, static_cast<int64_t>(element_size), &bytes),
            "shape: " + std::to_string(numel) + " elements of " + std::to_string(element_size) +
                " bytes overflow int64");
  return s;
}

bool valid_dtype(DType d) { return find(d) != nullptr; }
size_t dtype_size(DType d) { auto* i = find(d); return i ? i->size : 0; }
const char* dtype_name(DType d) { auto* i = find(d); return i ? i->name : "unknown"; }

at::ScalarType to_scalar_type(DType d) {
  auto* i = find(d);
  check_arg(i != nullptr, "unknown dtype " + std::to_string(static_cast<int>(d)));
  return i->scalar;
}

DType from_scalar_type(at::ScalarType t) {
  for (auto& i : kDtypes)
    if (i.scalar == t) return i.dtype;
  fail(Status::Unsupported, std::string("dtype ") + c10::toString(t) + " has no libddp equivalent");
}

Device device_of(const at::Tensor& t) {
  if (t.is_cuda()) return Device{DeviceType::CUDA, t.get_device()};
  return Device{DeviceType::CPU, 0};
}

namespace {
// The deleter of every view of caller memory: it frees nothing, and its
// address is what tells such a view apart (is_caller_memory).
void leave_to_caller(void*) {}
}  // namespace

bool is_caller_memory(const at::Tensor& t) {
  return t.defined() && t.has_storage() && t.storage().data_ptr().get_deleter() == &leave_to_caller;
}

at::Tensor tensor_from_blob(void* data, DType dtype, const int64_t* shape, size_t ndim) {
  auto st = to_scalar_type(dtype);
  auto s = checked_shape(shape, ndim, dtype_size(dtype));
  int64_t numel = 1;
  for (auto v : s) numel *= v;
  check_arg(data || numel == 0, "data is NULL for a tensor of " + std::to_string(numel) + " elements");
  check_arg(!data || reinterpret_cast<uintptr_t>(data) % dtype_size(dtype) == 0,
            "data is not aligned to " + std::to_string(dtype_size(dtype)) + " bytes for " +
                dtype_name(dtype));
  static char empty_storage[8];
  void* memory = data ? data : empty_storage;
  return at::for_blob(memory, s).context(memory, &leave_to_caller).options(at::TensorOptions().dtype(st)).make_tensor();
}

at::Device to_aten_device(Device d) {
  return d.type == DeviceType::CUDA ? at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(d.index)) : at::Device(at::kCPU);
}

at::Tensor tensor_zeros(DType dtype, const int64_t* shape, size_t ndim, Device device) {
  auto st = to_scalar_type(dtype);
  auto s = checked_shape(shape, ndim, dtype_size(dtype));
  at::TensorOptions o = at::TensorOptions().dtype(st);
  if (device.type == DeviceType::CUDA) {
    require_cuda_runtime();
    o = o.device(to_aten_device(device));
  } else {
    check_arg(device.type == DeviceType::CPU, "unknown device type " + std::to_string(static_cast<int>(device.type)));
  }
  // Shape, dtype and device were checked above: what can still fail is the
  // allocation itself (Status::NoMemory) or, on CUDA, the device being
  // unusable.
  try {
    return at::zeros(s, o);
  } catch (const c10::Error& e) {
    const bool cuda = device.type == DeviceType::CUDA;
    fail_from_aten(cuda ? Status::Unsupported : Status::Internal,
                   cuda ? "zeros on cuda:" + std::to_string(device.index) : std::string("zeros"), e);
  }
}

void tensor_copy_to_host(const at::Tensor& t, void* dst, size_t nbytes) {
  size_t have = t.numel() * t.element_size();
  check_arg(nbytes == have, "copy_to: nbytes " + std::to_string(nbytes) + " != tensor size " +
                                std::to_string(have) + " bytes");
  check_arg(dst || nbytes == 0, "copy_to: dst is NULL");
  if (nbytes == 0) return;
  at::Tensor host = t.is_cpu() ? t.contiguous() : t.cpu().contiguous();
  std::memcpy(dst, host.data_ptr(), nbytes);
}

void tensor_copy_from_host(const at::Tensor& t, const void* src, size_t nbytes) {
  size_t have = t.numel() * t.element_size();
  check_arg(nbytes == have, "copy_from: nbytes " + std::to_string(nbytes) + " != tensor size " +
                                std::to_string(have) + " bytes");
  check_arg(src || nbytes == 0, "copy_from: src is NULL");
  check_arg(t.is_contiguous(), "copy_from: the tensor is not contiguous");
  if (nbytes == 0) return;
  if (t.is_cpu()) {
    std::memmove(t.data_ptr(), src, nbytes);
    return;
  }
  at::Tensor host = at::from_blob(const_cast<void*>(src), t.sizes(), at::TensorOptions().dtype(t.scalar_type()));
  t.copy_(host);
}

}  // namespace ddp::core