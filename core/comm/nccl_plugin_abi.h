// The one entry point of libddp_nccl.so. Both sides are built from this tree
// against the same LibTorch, so C++ types may cross (they are not a public ABI).
#pragma once

#include <cstddef>

#include "comm/backend_factory.h"

namespace ddp::core {

// Returns a new c10d::Backend with one reference owned by the caller (to be
// reclaimed into an intrusive_ptr), or NULL with *status and err set.
using DdpNcclMakeBackendFn = c10d::Backend* (*)(const BackendSpec* spec, int* status, char* err,
                                                size_t err_len);
constexpr const char* kDdpNcclMakeBackendSymbol = "ddp_nccl_plugin_make_backend_v1";

}  // namespace ddp::core