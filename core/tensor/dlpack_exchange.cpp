#include "tensor/dlpack_exchange.h"

#include <ATen/DLConvertor.h>

#include "common/error.h"
#include "tensor/tensors.h"

namespace ddp::core {

at::Tensor tensor_from_dlpack(void* dl_managed_tensor) {
  if (!dl_managed_tensor) fail(Status::InvalidArgument, "the DLManagedTensor is NULL");
  auto* managed = static_cast<DLManagedTensor*>(dl_managed_tensor);
  at::Tensor t;
  try {
    t = at::fromDLPack(managed);
  } catch (const c10::Error& e) {
    // ATen refuses a device or dtype before it wraps the memory, and then
    // drops its deleter unrun: ownership passed to us, so we delete it.
    if (managed->deleter) managed->deleter(managed);
    fail(Status::InvalidArgument, std::string("the DLPack tensor cannot be used: ") + e.what_without_backtrace());
  }
  // Refusals below drop t, which runs the producer's deleter.
  from_scalar_type(t.scalar_type());  // a dtype without a ddp_dtype (complex)
  // libddp's tensors are contiguous (tensor.h): a strided view is refused
  // rather than copied, so what libddp writes always lands in the producer's memory.
  if (!t.is_contiguous())
    fail(Status::InvalidArgument, "the DLPack tensor is not contiguous (strides " + c10::str(t.strides()) +
                                      "): pass a contiguous one, e.g. torch's .contiguous()");
  return t;
}

void* tensor_to_dlpack(const at::Tensor& t) {
  if (!t.defined()) fail(Status::InvalidArgument, "the tensor is undefined");
  return at::toDLPack(t);
}

}  // namespace ddp::core
