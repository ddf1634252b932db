// The NCCL backend lives in a plugin, libddp_nccl.so, next to libddp.so.
// Loading it on demand keeps libtorch_cuda and the CUDA runtime out of every
// CPU-only process (they cost start-up time and need no GPU), and lets a
// CPU-only build of libddp exist at all.
#include "comm/backend_factory.h"
#include "comm/nccl_plugin_abi.h"
#include "common/cuda_plugin.h"
#include "common/error.h"

namespace ddp::core {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendSpec& spec) {
  if (spec.device.type != DeviceType::CUDA)
    fail(Status::InvalidArgument, "the nccl backend needs a CUDA device: set the device to DDP_DEVICE_CUDA");
  auto fn = reinterpret_cast<DdpNcclMakeBackendFn>(cuda_plugin_symbol(kDdpNcclMakeBackendSymbol));
  char err[1024] = {0};
  int status = 0;
  c10d::Backend* raw = fn(&spec, &status, err, sizeof(err));
  if (!raw) fail(status ? static_cast<Status>(status) : Status::Backend, err);
  return c10::intrusive_ptr<c10d::Backend>::reclaim(raw);
}

}  // namespace ddp::core