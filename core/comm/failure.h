// Classifying what c10d, Gloo and the TCPStore throw into libddp statuses.
#pragma once

#include <exception>
#include <string>

#include "ddp/common.h"

namespace ddp {

// DDP_E_TIMEOUT for timeouts, DDP_E_PEER_FAILED for closed or reset
// connections, DDP_E_BACKEND otherwise (ddp::Error keeps its own status).
ddp_status classify_exception(const std::exception& e);

// The first line of what(), without c10's long C++ stack trace.
std::string short_what(const std::exception& e);

}  // namespace ddp
