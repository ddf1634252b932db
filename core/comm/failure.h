// Classifying what c10d, Gloo and the TCPStore throw into libddp statuses.
#pragma once

#include <exception>
#include <string>

#include "common/types.h"

namespace ddp::core {

// Status::Timeout for timeouts, Status::PeerFailed for closed or reset
// connections, Status::Backend otherwise (ddp::core::Error keeps its own status).
Status classify_exception(const std::exception& e);

// Whether `e` says a store's host did not answer within the connection's
// bound (a BoundedStore's DistNetworkError that says it timed out): the host
// is stopped or stalled, not gone, and the connection is closed.
bool read_timed_out(const std::exception& e);

// The first line of what(), without c10's long C++ stack trace.
std::string short_what(const std::exception& e);

}  // namespace ddp::core