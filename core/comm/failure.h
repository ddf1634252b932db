// Classifying what c10d, Gloo and the TCPStore throw into libddp statuses.
#pragma once

#include <exception>
#include <string>

#include "common/types.h"

namespace ddp::core {

// Status::Timeout for timeouts, Status::PeerFailed for closed or reset
// connections, Status::Backend otherwise (ddp::core::Error keeps its own status).
Status classify_exception(const std::exception& e);

// Whether `e` says a read on a store connection passed its socket's bound
// (connect_store's SO_RCVTIMEO: c10d's DistNetworkError "Socket
// Timeout"). The host is stopped or stalled, not gone, and the connection
// is out of step: its late answer would be read as the next call's
// (close_if_out_of_step).
bool read_timed_out(const std::exception& e);

// The first line of what(), without c10's long C++ stack trace.
std::string short_what(const std::exception& e);

}  // namespace ddp::core