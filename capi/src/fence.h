// The one exception fence of the C API: every exported body runs inside
// fence(), which maps any C++ exception to a ddp_status and stores its
// message as the calling thread's last error. Nothing crosses the boundary.
#pragma once

#include <string>

#include "ddp/common.h"
#include "vocabulary.h"

namespace ddp::capi {
using namespace ddp::core;  // the C layer maps onto the core: its names are used throughout

void set_last_error(const std::string& message);
ddp_status store_current_exception();  // call only inside a catch block

template <typename F>
ddp_status fence(F&& body) noexcept {
  try {
    body();
    return DDP_OK;
  } catch (...) {
    return store_current_exception();
  }
}

// For bad arguments detected in the C layer itself.
inline ddp_status invalid(const std::string& message) {
  set_last_error(message);
  return DDP_E_INVALID_ARGUMENT;
}

// The body of every ddp_*_options_init: the defaults of the one version
// this libddp knows, or DDP_E_INVALID_ARGUMENT naming the function.
template <typename Options>
ddp_status init_options(Options* opts, unsigned int version, unsigned int known, const Options& defaults,
                        const char* fn) {
  if (!opts) return invalid(std::string(fn) + ": opts is NULL");
  if (version != known)
    return invalid(std::string(fn) + ": unknown version " + std::to_string(version) + " (this libddp knows " +
                   std::to_string(known) + ")");
  *opts = defaults;
  return DDP_OK;
}

}  // namespace ddp::capi
