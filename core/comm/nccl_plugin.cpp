// libddp_nccl.so: creates c10d's ProcessGroupNCCL. Built only when CUDA and
// NCCL headers are found; exercised only where a GPU is present.
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <cstring>
#include <string>

#include "comm/failure.h"
#include "comm/nccl_plugin_abi.h"

namespace {
void set_error(int* status, char* err, size_t len, ddp::core::Status code, const std::string& msg) {
  *status = static_cast<int>(code);
  if (len) {
    std::strncpy(err, msg.c_str(), len - 1);
    err[len - 1] = '\0';
  }
}
}  // namespace

extern "C" __attribute__((visibility("default"))) c10d::Backend* ddp_nccl_plugin_make_backend_v1(
    const ddp::core::BackendSpec* spec, int* status, char* err, size_t err_len) {
  try {
    int count = c10::cuda::device_count();
    if (count == 0) {
      set_error(status, err, err_len, ddp::core::Status::Unsupported, "nccl: no CUDA device is visible to this process");
      return nullptr;
    }
    if (spec->device.index < 0 || spec->device.index >= count) {
      set_error(status, err, err_len, ddp::core::Status::InvalidArgument,
                "nccl: device cuda:" + std::to_string(spec->device.index) + " does not exist (" +
                    std::to_string(count) + " visible)");
      return nullptr;
    }
    c10::cuda::set_device(static_cast<c10::DeviceIndex>(spec->device.index));
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = spec->timeout;
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(spec->store, spec->rank, spec->size, opts);
    return c10::intrusive_ptr<c10d::Backend>(std::move(pg)).release();
  } catch (const std::exception& e) {
    set_error(status, err, err_len, ddp::core::classify_exception(e), "nccl: " + ddp::core::short_what(e));
    return nullptr;
  }
}
