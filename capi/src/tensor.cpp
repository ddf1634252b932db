#include "ddp/tensor.h"

#include "common/error.h"
#include "handles.h"
#include "tensor/dlpack_exchange.h"
#include "tensor/tensors.h"
#include "tensor/torch_version.h"

using namespace ddp::capi;

extern "C" {

ddp_status ddp_tensor_from_blob(ddp_tensor** out, void* data, ddp_dtype dtype, const int64_t* shape,
                                size_t ndim) {
  if (!out) return invalid("ddp_tensor_from_blob: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(ddp::core::tensor_from_blob(data, to_core(dtype), shape, ndim))); });
}

ddp_status ddp_tensor_new(ddp_tensor** out, ddp_dtype dtype, const int64_t* shape, size_t ndim,
                          ddp_device device) {
  if (!out) return invalid("ddp_tensor_new: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(ddp::core::tensor_zeros(to_core(dtype), shape, ndim, to_core(device)))); });
}

ddp_status ddp_tensor_from_aten(ddp_tensor** out, const void* aten_tensor) {
  if (!out) return invalid("ddp_tensor_from_aten: out is NULL");
  *out = nullptr;
  if (!aten_tensor) return invalid("ddp_tensor_from_aten: aten_tensor is NULL");
  return fence([&] {
    const at::Tensor& t = *static_cast<const at::Tensor*>(aten_tensor);
    if (!t.defined()) fail(DDP_E_INVALID_ARGUMENT, "ddp_tensor_from_aten: the tensor is undefined");
    hand_out(out, wrap_tensor(t));
  });
}

ddp_status ddp_tensor_to_aten(const ddp_tensor* t, void* aten_out) {
  if (!aten_out) return invalid("ddp_tensor_to_aten: aten_out is NULL");
  return fence([&] { *static_cast<at::Tensor*>(aten_out) = require(t, "tensor")->t; });
}

ddp_status ddp_tensor_from_dlpack(ddp_tensor** out, void* dl_managed_tensor) {
  if (!out) {
    // Ownership passes on every return: a refused one is deleted here too.
    if (dl_managed_tensor) fence([&] { ddp::core::tensor_from_dlpack(dl_managed_tensor); });
    return invalid("ddp_tensor_from_dlpack: out is NULL");
  }
  *out = nullptr;
  if (!dl_managed_tensor) return invalid("ddp_tensor_from_dlpack: dl_managed_tensor is NULL");
  return fence([&] { hand_out(out, wrap_tensor(ddp::core::tensor_from_dlpack(dl_managed_tensor))); });
}

ddp_status ddp_tensor_to_dlpack(const ddp_tensor* t, void** dl_managed_tensor) {
  if (!dl_managed_tensor) return invalid("ddp_tensor_to_dlpack: dl_managed_tensor is NULL");
  *dl_managed_tensor = nullptr;
  return fence([&] { *dl_managed_tensor = ddp::core::tensor_to_dlpack(require(t, "tensor")->t); });
}

const char* ddp_torch_version(void) { return ddp::core::torch_version(); }

ddp_status ddp_torch_check_version(const char* caller_version) {
  if (!caller_version) return invalid("ddp_torch_check_version: caller_version is NULL");
  return fence([&] { ddp::core::check_torch_version(caller_version); });
}

void ddp_tensor_free(ddp_tensor* t) { release(t); }

void* ddp_tensor_data(const ddp_tensor* t) {
  auto* h = live(t); return h && h->t.numel() > 0 ? h->t.data_ptr() : nullptr;
}
size_t ddp_tensor_ndim(const ddp_tensor* t) { auto* h = live(t); return h ? h->shape.size() : 0; }
const int64_t* ddp_tensor_shape(const ddp_tensor* t) {
  auto* h = live(t); return h && !h->shape.empty() ? h->shape.data() : nullptr;
}
ddp_dtype ddp_tensor_dtype(const ddp_tensor* t) {
  auto* h = live(t);
  if (!h) return DDP_FLOAT32;
  ddp_dtype d = DDP_FLOAT32;
  fence([&] { d = to_c(ddp::core::from_scalar_type(h->t.scalar_type())); });
  return d;
}
int64_t ddp_tensor_numel(const ddp_tensor* t) { auto* h = live(t); return h ? h->t.numel() : 0; }
size_t ddp_tensor_nbytes(const ddp_tensor* t) {
  auto* h = live(t); return h ? static_cast<size_t>(h->t.numel()) * h->t.element_size() : 0;
}
ddp_device ddp_tensor_device(const ddp_tensor* t) {
  auto* h = live(t); return h ? to_c(ddp::core::device_of(h->t)) : ddp_device{DDP_DEVICE_CPU, 0};
}

ddp_status ddp_tensor_copy_to(const ddp_tensor* t, void* dst, size_t nbytes) {
  return fence([&] { ddp::core::tensor_copy_to_host(require(t, "tensor")->t, dst, nbytes); });
}

ddp_status ddp_tensor_copy_from(ddp_tensor* t, const void* src, size_t nbytes) {
  return fence([&] { ddp::core::tensor_copy_from_host(require(t, "tensor")->t, src, nbytes); });
}

}  // extern "C"
