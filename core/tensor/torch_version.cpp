#include "tensor/torch_version.h"

#include <torch/version.h>

#include <cstdio>

#include "common/error.h"

namespace ddp::core {
namespace {

#define DDP_STR_(x) #x
#define DDP_STR(x) DDP_STR_(x)
constexpr const char kBuiltWith[] =
    DDP_STR(TORCH_VERSION_MAJOR) "." DDP_STR(TORCH_VERSION_MINOR) "." DDP_STR(TORCH_VERSION_PATCH);

// The leading "MAJOR.MINOR" of a version string, or false.
bool major_minor(const std::string& v, int& major, int& minor) {
  int used = 0;
  return std::sscanf(v.c_str(), "%d.%d%n", &major, &minor, &used) == 2 && used > 0 && major >= 0 && minor >= 0;
}

}  // namespace

const char* torch_version() { return kBuiltWith; }

void check_torch_version(const std::string& caller) {
  int major = 0, minor = 0;
  if (!major_minor(caller, major, minor))
    fail(Status::InvalidArgument, "LibTorch version check: '" + caller + "' is not a version (MAJOR.MINOR[.PATCH])");
  if (major != TORCH_VERSION_MAJOR || minor != TORCH_VERSION_MINOR)
    fail(Status::Unsupported, "the caller's LibTorch is " + caller + ", libddp was built against LibTorch " +
                                  kBuiltWith + ": objects can be handed over by address only within one major.minor "
                                  "release (build libddp against the caller's LibTorch, or use the one libddp links)");
}

}  // namespace ddp::core
