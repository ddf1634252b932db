// Lightning's distributed utilities on a Group: every collective starts
// asynchronously and returns a Pending; blocking calls are start + wait.
#pragma once

#include <ATen/core/Tensor.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/group.h"
#include "debug/flight_recorder.h"

namespace c10d {
class Work;
}

namespace ddp::core {


// An operation in flight. Some collectives run in several steps (the length
// before the bytes, the shapes before the data); their later steps are posted
// from wait(), so every rank must wait on its pendings in the same order it
// started them.
class Pending {
 public:
  using Step = std::function<void(Pending&, Clock::time_point deadline)>;

  // `ticket`: the collective's flight recorder entry, which the Pending
  // keeps up to date (0: none).
  Pending(Group& group, std::string op, c10::intrusive_ptr<c10d::Work> work, Step then,
          flight::Ticket ticket = 0);
  ~Pending();

  // Waits for completion (and runs the remaining steps). timeout: nullopt =
  // the group's timeout. A timeout or a peer failure breaks the group.
  void wait(std::optional<Millis> timeout = std::nullopt);
  bool done() const { return done_; }
  // True once the current communication step finished (no waiting).
  bool test();
  // After test() is true: what the communication failed with, if it did.
  std::exception_ptr failure() const;
  // For a collective with no host step left: makes the current device
  // stream wait for its communication (c10d's Work::synchronize) so that the
  // host need not (see comm/stream_watch.h). False, doing nothing, when a
  // host step remains.
  bool order_on_stream();

  // Results, valid after wait().
  std::vector<at::Tensor> tensors;
  std::vector<uint8_t> bytes;
  bool decision = false;

  // Used by the steps: waits for `work` until `deadline`, classifying failures.
  void wait_work(const c10::intrusive_ptr<c10d::Work>& work, Clock::time_point deadline);
  // What wait() does with a failure (classified; a timeout or a dead peer
  // breaks and publishes the group) and with a passed deadline (`context`
  // follows "timed out on rank R of N"). For watchers that do not wait
  // (comm/stream_watch.h). Both always throw.
  [[noreturn]] void throw_failure(std::exception_ptr failure);
  [[noreturn]] void throw_timeout(const std::string& context);
  Group& group() { return group_; }
  const std::string& op() const { return op_; }
  // The work runs on caller memory as it is (comm/caller_memory.h): if this
  // goes before its wait completed, it waits for the work to end first
  // (within the group's timeout; past it the group is broken, which ends
  // the work), so that the caller may take its memory back after.
  void hold_caller_memory() { holds_caller_memory_ = true; }

 private:
  Group& group_;
  std::string op_;
  c10::intrusive_ptr<c10d::Work> work_;
  Step then_;
  bool done_ = false;
  flight::Ticket ticket_ = 0;
  bool recorded_end_ = false;
  bool holds_caller_memory_ = false;
  // The entry's final state; before any dump, which a failure triggers.
  void record_end(flight::State s);
};

using PendingPtr = std::unique_ptr<Pending>;

// Code that one rank runs while its peers wait elsewhere (the strategy's
// writes on global rank 0, a checkpoint_io callback among them) runs inside
// a SoloSection on its thread. A collective started on that thread
// meanwhile, on a group of more than one rank, could only end in the
// group's timeout (the peers never join it, or join it as another call):
// it is refused at once, Status::State naming the section, before any
// communication, and the group stays usable. Sections nest.
class SoloSection {
 public:
  // `what`: the code, for the message ("save_checkpoint's write on global rank 0").
  explicit SoloSection(std::string what);
  ~SoloSection();
  SoloSection(const SoloSection&) = delete;
  SoloSection& operator=(const SoloSection&) = delete;
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  const SoloSection* outer_;
};

PendingPtr barrier(Group& g);
PendingPtr broadcast(Group& g, const at::Tensor& t, int src);
// Lightning's broadcast(obj), as bytes: the length first, then the payload.
// `data` is read on src only; the result is in Pending::bytes on every rank.
PendingPtr broadcast_bytes(Group& g, const void* data, size_t len, int src);
// In place. MEAN on gloo is SUM then division by the world size (Lightning's
// sync_ddp); on integer tensors the quotient is truncated toward zero.
PendingPtr all_reduce(Group& g, const at::Tensor& t, ReduceOp op);
// What all_reduce(g, t, op)->wait(), barrier(g)->wait() and
// broadcast(g, t, src)->wait() do, with the same checks, flight records and
// failures; where the backend can perform the call on this thread right now
// (comm/direct_collectives.h), no c10d work or Pending is made.
void all_reduce_blocking(Group& g, const at::Tensor& t, ReduceOp op);
void barrier_blocking(Group& g);
void broadcast_blocking(Group& g, const at::Tensor& t, int src);
// DDP's bucket all-reduce with no bucket to copy into or out of, where the
// group's backend offers it (shm on one host; comm/direct_collectives.h):
// a SUM of `parts` taken end to end as one 1-D tensor, in place, each
// rank's values multiplied by `scale` first, with the bits PyTorch's
// reducer gets from its bucket. Checked, recorded and failing as
// all_reduce of that tensor. The parts are written while it runs.
bool takes_parts(Group& g, at::ScalarType type);
PendingPtr all_reduce_parts(Group& g, std::vector<at::Tensor> parts, double scale);
// A bucket the group's backend all-reduces in place with the fewest copies
// (shm on one host: memory every rank maps; comm/direct_collectives.h), or
// an undefined tensor where it has none. Collective: every rank asks for
// the same sizes in the same order. offers_shared_buckets: whether it has
// any (the same answer on every rank; no communication).
at::Tensor shared_bucket(Group& g, at::ScalarType type, int64_t numel);
bool offers_shared_buckets(Group& g);
PendingPtr reduce(Group& g, const at::Tensor& t, int dst, ReduceOp op);
// PyTorch's comm hooks average by dividing first, then all-reducing with SUM
// (the result differs in rounding from SUM-then-divide, so hooks that match
// PyTorch bit for bit use this). Divides `t` in place by `divisor`.
PendingPtr divide_then_sum(Group& g, const at::Tensor& t, int64_t divisor);
// Result: tensors[0] of shape (world, ...in.shape).
PendingPtr all_gather(Group& g, const at::Tensor& in);
// all_gather, blocking, through the backend's direct path where it has one.
at::Tensor all_gather_blocking(Group& g, const at::Tensor& in);
// PyTorch's all_gather_into_tensor: rank r's `in` lands at element
// r * in.numel() of the caller's `out` (contiguous, in's dtype and device,
// world * in.numel() elements, any shape). `in` may be out's own part for
// this rank (an in-place gather); any other overlap is refused. Nothing is
// allocated, so a caller gathering the same sizes every step reuses `out`.
PendingPtr all_gather_into(Group& g, const at::Tensor& in, const at::Tensor& out);
void all_gather_into_blocking(Group& g, const at::Tensor& in, const at::Tensor& out);
// Lightning's gather_all_tensors: same ndim, any sizes. Result: one tensor
// per rank, each with that rank's shape.
PendingPtr all_gather_uneven(Group& g, const at::Tensor& in);
// Lightning's reduce_boolean_decision: all=true -> every rank said yes.
PendingPtr reduce_boolean_decision(Group& g, bool decision, bool all);

}  // namespace ddp::core