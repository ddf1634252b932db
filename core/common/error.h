// The one exception type the core throws. It carries the C status code that
// the C API's exception fence hands to the caller, so a failure is classified
// once, where it is understood, and never re-guessed from message text above.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "common/types.h"

namespace ddp::core {

class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// The ranks called different collectives and a check caught it before any
// data was combined: the group stays usable. The flight recorder dumps on it.
class CallMismatch : public Error {
 public:
  explicit CallMismatch(const std::string& message) : Error(Status::InvalidArgument, message) {}
};

// An Error thrown by a libddp operator inside TorchScript code reaches the
// module's caller wrapped in the interpreter's own exception, its status
// lost. The operator parks it on its thread before it unwinds; the caller
// (ScriptModule::forward) takes it back and rethrows it, status intact.
inline thread_local std::optional<Error> parked_error;

[[noreturn]] inline void fail(Status status, const std::string& message) {
  throw Error(status, message);
}

inline void check_arg(bool ok, const std::string& message) {
  if (!ok) fail(Status::InvalidArgument, message);
}

}  // namespace ddp::core