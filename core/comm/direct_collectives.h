// What libddp's own backend (shm) offers beside c10d::Backend: a blocking
// collective performed on the caller's thread with no c10d::Work. For a
// 4-byte all-reduce the Work, its future, the Pending that waits for it and
// the std::function wrappers cost about as much as the exchange between the
// ranks itself; a caller that blocks anyway needs none of them.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "common/types.h"

namespace at {
class Tensor;
}
namespace c10d {
class Work;
}

namespace ddp::core {

class DirectCollectives {
 public:
  // Performs the collective now and returns true, or returns false
  // having done nothing when the call must take the c10d path (a collective
  // queued or running before it, a tensor, dtype or op this path does not
  // take). Throws what the c10d path's work would have failed with.
  virtual bool all_reduce_now(const at::Tensor& t, const c10d::ReduceOp& op) = 0;
  virtual bool barrier_now() = 0;
  virtual bool broadcast_now(const at::Tensor& t, int root) = 0;
  // Rank r's `in` into `out` at byte r * in.nbytes() (out: contiguous,
  // world * in.numel() elements of in's dtype, checked by the caller).
  virtual bool all_gather_now(const at::Tensor& in, const at::Tensor& out) = 0;

  // Whether the backend's c10d call with these arguments is one it performs
  // itself, in call order on threads that settle() waits for, rather than
  // one it hands to another backend (Gloo, whose threads may go on after a
  // failed wait): then caller memory may go to it as it is
  // (comm/caller_memory.h), and a work freed unwaited is waited for. False
  // on the backend's own worker thread (a hook continuing there), where such
  // a wait could only wait for itself. `out` of a gather is one tensor of a
  // row per rank.
  virtual bool performs_all_reduce(const at::Tensor& t, const c10d::ReduceOp& op) const = 0;
  virtual bool performs_reduce(const at::Tensor& t, const c10d::ReduceOp& op) const = 0;
  virtual bool performs_broadcast(const at::Tensor& t) const = 0;
  virtual bool performs_all_gather(const at::Tensor& in, const at::Tensor& out) const = 0;

  // DDP's bucket without the bucket: a SUM all-reduce of `parts` taken end
  // to end as one tensor, where they lie, each rank's values multiplied by
  // `scale` first (as PyTorch's reducer scales gradients into its bucket;
  // the result has the bucket's bits). Queued in call order as allreduce()
  // is; the work holds the parts. Only for plain CPU parts of one dtype
  // that takes_parts() accepts.
  virtual bool takes_parts(c10::ScalarType type) const = 0;
  virtual c10::intrusive_ptr<c10d::Work> all_reduce_parts(std::vector<at::Tensor> parts, double scale) = 0;

  // A 1-D tensor of `numel` elements of `type` in memory that every rank of
  // the host maps (shm/local_collectives.h: a shared bucket), which the
  // backend all-reduces in place with fewer copies than any other tensor;
  // undefined where it offers none (several hosts, a dtype it does not
  // reduce). Collective: every rank of the group asks for the same sizes in
  // the same order. Contents start as zeros.
  virtual at::Tensor shared_bucket(c10::ScalarType type, int64_t numel) = 0;
  // Whether shared_bucket can answer anything but undefined (the same on every rank).
  virtual bool offers_shared_buckets() const = 0;

  // This rank failed outside the backend (the store went away, a hook
  // failed): the host's other ranks, which wait on this one without
  // asking the store, stop waiting with `status` and this rank's `reason`
  // instead of finding it dead or silent later.
  virtual void abort_local(Status status, const std::string& reason) = 0;
  // Once this rank's group is broken (its segment aborted, here or by a
  // peer): returns when no collective of this backend runs on another
  // thread any more (those queued will not start), or at `deadline`. A
  // collective that a failed wait left running may be reading or writing
  // the caller's memory (DDP's gradients, all-reduced where they lie), which
  // the caller may free as soon as its call returns. The running one ends
  // at its next wait, which sees the abort. A no-op on the worker thread.
  virtual void settle(std::chrono::steady_clock::time_point deadline) = 0;

 protected:
  ~DirectCollectives() = default;
};

}  // namespace ddp::core
