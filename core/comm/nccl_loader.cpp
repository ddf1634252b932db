// The NCCL backend lives in a plugin, libddp_nccl.so, next to libddp.so.
// Loading it on demand keeps libtorch_cuda and the CUDA runtime out of every
// CPU-only process (they cost start-up time and need no GPU), and lets a
// CPU-only build of libddp exist at all.
#include <dlfcn.h>

#include <string>

#include "comm/backend_factory.h"
#include "comm/nccl_plugin_abi.h"
#include "common/error.h"

namespace ddp {
namespace {

std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

DdpNcclMakeBackendFn load_plugin() {
  static DdpNcclMakeBackendFn fn = nullptr;
  static std::string error;
  static bool tried = false;
  if (tried) {
    if (!fn) fail(DDP_E_UNSUPPORTED, error);
    return fn;
  }
  tried = true;
  std::string path = own_directory() + "libddp_nccl.so";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    error = "the nccl backend is not available: " + std::string(dlerror()) +
            " (libddp was built without CUDA/NCCL headers, or the plugin was not installed)";
    fail(DDP_E_UNSUPPORTED, error);
  }
  fn = reinterpret_cast<DdpNcclMakeBackendFn>(dlsym(h, kDdpNcclMakeBackendSymbol));
  if (!fn) {
    error = "libddp_nccl.so does not export " + std::string(kDdpNcclMakeBackendSymbol);
    fail(DDP_E_UNSUPPORTED, error);
  }
  return fn;
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendSpec& spec) {
  if (spec.device.type != DDP_DEVICE_CUDA)
    fail(DDP_E_INVALID_ARGUMENT, "the nccl backend needs a CUDA device: set device to DDP_DEVICE_CUDA");
  auto fn = load_plugin();
  char err[1024] = {0};
  int status = 0;
  c10d::Backend* raw = fn(&spec, &status, err, sizeof(err));
  if (!raw) fail(status ? status : DDP_E_BACKEND, err);
  return c10::intrusive_ptr<c10d::Backend>::reclaim(raw);
}

}  // namespace ddp
