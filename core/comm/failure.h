// Classifying what c10d, Gloo, the TCPStore and ATen throw into libddp statuses.
#pragma once

#include <exception>
#include <string>

#include "common/types.h"

namespace ddp::core {

// Status::NoMemory where an allocator failed, Status::Timeout for timeouts,
// Status::PeerFailed for closed or reset connections, Status::Backend
// otherwise (ddp::core::Error keeps its own status).
Status classify_exception(const std::exception& e);

// Whether `e` is an allocation that failed: c10's OutOfMemoryError (CUDA's
// caching allocator, our host cache) or the CPU allocator's refusal, which
// c10 throws as a plain c10::Error ("DefaultCPUAllocator: can't allocate
// memory").
bool is_out_of_memory(const std::exception& e);

// Throws ddp::core::Error for an exception ATen threw while computing
// `context`: Status::NoMemory where an allocation failed, `otherwise` (what
// the caller's input was, say Status::InvalidArgument) for anything else.
[[noreturn]] void fail_from_aten(Status otherwise, const std::string& context, const std::exception& e);

// Whether `e` says a store's host did not answer within the connection's
// bound (a BoundedStore's DistNetworkError that says it timed out): the host
// is stopped or stalled, not gone, and the connection is closed.
bool read_timed_out(const std::exception& e);

// The first line of what(), without c10's long C++ stack trace.
std::string short_what(const std::exception& e);

}  // namespace ddp::core