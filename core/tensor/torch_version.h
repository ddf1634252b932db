// Which LibTorch libddp was built against, and whether a caller's LibTorch
// may hand its objects (at::Tensor, torch::optim optimizers) over by
// address: only one of the same major.minor lays them out the same way.
#pragma once

#include <string>

namespace ddp::core {

// "MAJOR.MINOR.PATCH" of the LibTorch headers this library was compiled with.
const char* torch_version();

// Status::Unsupported naming both versions when `caller` (e.g. "2.11.0",
// "2.11.0+cpu", torch.__version__) has another major.minor;
// Status::InvalidArgument when it does not start with "MAJOR.MINOR".
void check_torch_version(const std::string& caller);

}  // namespace ddp::core
