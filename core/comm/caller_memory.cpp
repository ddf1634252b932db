#include "comm/caller_memory.h"

#include <string>

#include "comm/failure.h"
#include "comm/staging_pool.h"
#include "common/error.h"
#include "tensor/tensors.h"

namespace ddp::core {

bool CallerMemory::at_risk(const at::Tensor& t) const {
  // A group of one rank has no peer whose data could arrive late.
  return is_caller_memory(t) && group_.size() > 1;
}

at::Tensor CallerMemory::stage(const at::Tensor& t, bool read, bool written) {
  if (!at_risk(t)) return t;
  if (in_place_) {
    used_in_place_ = true;
    return t;
  }
  at::Tensor copy;
  try {
    copy = group_.staging_pool().like(t);
    if (read) copy.copy_(t);
  } catch (const std::exception& e) {
    flight::finish(ticket_, flight::State::Refused);
    fail_from_aten(Status::Internal, std::string(op_) + ": a copy of the caller's " + std::to_string(t.nbytes()) + " bytes",
                   e);
  }
  if (written) back_.emplace_back(t, copy);
  return copy;
}

Pending::Step CallerMemory::after(Pending::Step then) const {
  if (back_.empty()) return then;
  return [back = back_, then = std::move(then)](Pending& p, Clock::time_point deadline) {
    for (const auto& [caller, copy] : back) caller.copy_(copy);
    if (then) then(p, deadline);
  };
}

}  // namespace ddp::core
