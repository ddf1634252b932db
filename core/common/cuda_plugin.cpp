#include "common/cuda_plugin.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include "common/error.h"

namespace ddp::core {
namespace {

std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_directory), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

struct Plugin {
  void* handle = nullptr;
  std::string error;
};

const Plugin& plugin() {
  static Plugin p;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string path = own_directory() + "libddp_nccl.so";
    p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!p.handle)
      p.error = "CUDA support is not available: " + std::string(dlerror()) +
                " (libddp was built without CUDA/NCCL headers, or libddp_nccl.so was not installed)";
  });
  return p;
}

}  // namespace

void require_cuda_runtime() {
  const Plugin& p = plugin();
  if (!p.handle) fail(Status::Unsupported, p.error);
}

void* cuda_plugin_symbol(const char* symbol) {
  require_cuda_runtime();
  const Plugin& p = plugin();
  void* fn = dlsym(p.handle, symbol);
  if (!fn) fail(Status::Unsupported, "libddp_nccl.so does not export " + std::string(symbol));
  return fn;
}

}  // namespace ddp::core