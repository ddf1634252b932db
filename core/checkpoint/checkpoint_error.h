// How every reader of a checkpoint file says what was wrong with it: one
// spelling, "checkpoint NAME: WHAT", as Status::IO. No LibTorch here, so
// that the pickle walk's fuzz target links without it.
#pragma once

#include <string>

#include "common/error.h"

namespace ddp::core {

[[noreturn]] inline void bad_checkpoint(const std::string& name, const std::string& what) {
  fail(Status::IO, "checkpoint " + name + ": " + what);
}

}  // namespace ddp::core
