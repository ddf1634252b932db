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
// direct paths (shm on the caller's thread: over when they return), which
// an async call on caller memory takes too where the shm backend would
// perform it on the calling thread anyway (small, nothing queued): the
// copies doubled the time of a 64 KiB to 1 MiB async all-reduce there.
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
  CallerMemory(Group& g, const char* op, flight::Ticket ticket) : group_(g), op_(op), ticket_(ticket) {}

  // Whether stage() copies `t` for a collective of `g`: caller memory, in
  // a group where another rank's data could arrive late.
  static bool staged(Group& g, const at::Tensor& t);

  // What to hand the backend for `t`: `t` itself unless it is caller memory;
  // else a copy of it in the group's staging pool (`read`: its values; else
  // uninitialised), copied back
  // into `t` by the step of after() when `written`.
  at::Tensor stage(const at::Tensor& t, bool read, bool written);
  at::Tensor read(const at::Tensor& t) { return stage(t, true, false); }
  at::Tensor read_written(const at::Tensor& t) { return stage(t, true, true); }
  at::Tensor written(const at::Tensor& t) { return stage(t, false, true); }

  // `then`, after the copies back (a Pending runs it once its work
  // succeeded, on the waiting thread); `then` itself when there are none.
  Pending::Step after(Pending::Step then) const;

 private:
  Group& group_;
  const char* op_;
  flight::Ticket ticket_;
  std::vector<std::pair<at::Tensor, at::Tensor>> back_;  // (the caller's, the copy)
};

}  // namespace ddp::core
