// DLPack exchange: tensors handed between libddp and another framework
// (PyTorch's __dlpack__, NumPy, JAX, Julia's DLPack.jl) without a copy.
// ATen's own converter does the work, so strides, devices and dtypes are
// exactly what PyTorch's torch.from_dlpack / to_dlpack would make.
#pragma once

#include <ATen/core/Tensor.h>

namespace ddp::core {

// A tensor over the memory of a DLManagedTensor (dlpack.h's unversioned
// struct), which it now owns: its deleter runs when the last tensor sharing
// the memory goes. Throws Status::InvalidArgument for NULL or a dtype or
// device ATen cannot take (the managed tensor is then deleted).
at::Tensor tensor_from_dlpack(void* dl_managed_tensor);

// A new DLManagedTensor sharing t's memory (strides and device included);
// the consumer calls its deleter once.
void* tensor_to_dlpack(const at::Tensor& t);

}  // namespace ddp::core
