// Caller memory (ddp_tensor_from_blob) reaches a c10d backend only as a copy
// that libddp owns. Such a backend works from threads of its own (Gloo's;
// the shm backend's worker for what it does not run on the caller's
// thread), and when a wait fails (a timeout, another rank's failure) its
// work may still be inside the collective: a stopped peer that resumes
// still sends, and Gloo writes what it receives and sends what it reads.
// The caller may have freed or reused that memory by then (measured: 11 M of
// 64 M floats written after a timed-out Gloo all-reduce had returned). A
// copy lives as long as the work that holds it; the caller's memory is
// written on the caller's thread, after the work succeeded. Tensors that
// libddp or LibTorch own need none (the work keeps them alive), nor do the
// direct paths (shm on the caller's thread: over when they return), nor a
// call that libddp's own backend performs itself (DirectCollectives::
// performs_*): its collective ends at its next wait once the group is
// broken, and the failing call returns after it (settle()); its Pending,
// freed unwaited, waits for its work (Pending::hold_caller_memory). The
// copies cost an async shm all-reduce on caller memory 1.4x to 2.9x the
// time of one on a tensor libddp owns (2 ranks, 4 KiB to 16 MiB).
#pragma once

#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

#include "comm/collectives.h"
#include "debug/flight_recorder.h"

namespace ddp::core {

class CallerMemory {
 public:
  // `op` names the collective in an out-of-memory message; `ticket` is its
  // flight record, marked refused when a copy cannot be made.
  // `in_place`: the group's backend performs the call itself, so caller
  // memory goes to it as it is (see above).
  CallerMemory(Group& g, const char* op, flight::Ticket ticket, bool in_place = false)
      : group_(g), op_(op), ticket_(ticket), in_place_(in_place) {}

  // What to hand the backend for `t`: `t` itself unless it is caller memory
  // and the call is not in place; else a copy of it in the group's staging
  // pool (`read`: its values; else uninitialised), copied back into `t` by
  // the step of after() when `written`.
  at::Tensor stage(const at::Tensor& t, bool read, bool written);
  at::Tensor read(const at::Tensor& t) { return stage(t, true, false); }
  at::Tensor read_written(const at::Tensor& t) { return stage(t, true, true); }
  at::Tensor written(const at::Tensor& t) { return stage(t, false, true); }

  // `then`, after the copies back (a Pending runs it once its work
  // succeeded, on the waiting thread); `then` itself when there are none.
  Pending::Step after(Pending::Step then) const;
  // Makes `p`, the call's Pending, wait for its work before it is freed
  // when caller memory went to the backend as it is.
  void hold(Pending& p) const {
    if (used_in_place_) p.hold_caller_memory();
  }

 private:
  // Caller memory, in a group where another rank's data could arrive late.
  bool at_risk(const at::Tensor& t) const;

  Group& group_;
  const char* op_;
  flight::Ticket ticket_;
  bool in_place_;
  bool used_in_place_ = false;
  std::vector<std::pair<at::Tensor, at::Tensor>> back_;  // (the caller's, the copy)
};

}  // namespace ddp::core
