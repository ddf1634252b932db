#include "tensor/dlpack_exchange.h"

#include <ATen/DLConvertor.h>

#include "common/error.h"

namespace ddp::core {

at::Tensor tensor_from_dlpack(void* dl_managed_tensor) {
  if (!dl_managed_tensor) fail(Status::InvalidArgument, "the DLManagedTensor is NULL");
  auto* managed = static_cast<DLManagedTensor*>(dl_managed_tensor);
  try {
    return at::fromDLPack(managed);
  } catch (const c10::Error& e) {
    // ATen refuses a device or dtype before it wraps the memory, and then
    // drops its deleter unrun: ownership passed to us, so we delete it.
    if (managed->deleter) managed->deleter(managed);
    fail(Status::InvalidArgument, std::string("the DLPack tensor cannot be used: ") + e.what_without_backtrace());
  }
}

void* tensor_to_dlpack(const at::Tensor& t) {
  if (!t.defined()) fail(Status::InvalidArgument, "the tensor is undefined");
  return at::toDLPack(t);
}

}  // namespace ddp::core
