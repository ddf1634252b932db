// The collectives over one shared-memory segment: the ranks of one host.
// Each call is one collective that every rank of the segment makes, in the
// same order; they run on the calling thread and return when done.
//
// Data moves in pieces of at most the slot size (one of at most
// Segment::kInlineBytes in the rank's control line). A piece is copied into the
// rank's own slot; after a barrier every rank reads what it needs from the
// others' slots. Halves alternate from piece to piece, so a rank writing the
// next piece never overwrites one that a slower rank is still reading: it
// has passed a barrier that every rank reaches only after reading.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/shm/reduce_kernels.h"
#include "comm/shm/segment.h"

namespace ddp::core::shm {

class LocalCollectives {
 public:
  explicit LocalCollectives(std::unique_ptr<Segment> segment);

  Segment& segment() { return *seg_; }

  // All-reduce (root < 0) or reduce to local rank `root`, in place, with
  // the same bits as Gloo's all-reduce (ring_order.h). Non-root ranks of a
  // reduce keep their input.
  void reduce(const at::Tensor& t, ReduceKind kind, int root, Clock::time_point deadline, const char* op);
  void broadcast(const at::Tensor& t, int root, Clock::time_point deadline, const char* op);
  // Rank r's `in` lands at dst[r] (in.nbytes() bytes each).
  void all_gather(const at::Tensor& in, const std::vector<uint8_t*>& dst, Clock::time_point deadline);
  void barrier(Clock::time_point deadline);

 private:
  enum CallKind : uint32_t { kAllReduce = 1, kReduce, kBroadcast, kAllGather, kBarrier };
  static std::string describe(const Segment::Call& c);
  void announce(CallKind kind, int reduce_op, const at::Tensor* t, int root);
  int next_half() { return static_cast<int>(pieces_++ & 1); }
  void reduce_whole(const at::Tensor& t, ReduceKind kind, bool keep, Clock::time_point deadline, const char* op);

  std::unique_ptr<Segment> seg_;
  uint64_t pieces_ = 0;
};

}  // namespace ddp::core::shm
