// libddp_nccl.so: the plugin that links libtorch_cuda. Loading it registers
// ATen's CUDA kernels and allocator, so both the NCCL backend and CUDA tensors
// need it loaded first; CPU-only processes never pay for it.
#pragma once

namespace ddp::core {

// Loads the plugin next to libddp.so once; returns its entry point named
// `symbol`. Throws Status::Unsupported (with dlerror's reason) when absent.
void* cuda_plugin_symbol(const char* symbol);

// Loads the plugin so that ATen can allocate and run on CUDA devices.
void require_cuda_runtime();

}  // namespace ddp::core