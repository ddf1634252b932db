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

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "comm/shm/reduce_kernels.h"
#include "comm/shm/segment.h"
#include "comm/shm/write_mode.h"

namespace ddp::core::shm {

// What a reduce works on: the elements of one tensor, or of several taken
// end to end (a DDP bucket's gradients where they lie, with no bucket to
// copy them into), all of one dtype. With a scale (float and double only),
// each rank's values are multiplied by it as they are read, the way
// PyTorch's reducer scales gradients on their way into its bucket, so the
// result has the bits the bucket's would have.
class Elements {
 public:
  struct Run {
    uint8_t* data;
    size_t count;  // elements
  };
  explicit Elements(const at::Tensor& t);
  // `runs` must outlive this view.
  Elements(c10::ScalarType type, const std::vector<Run>& runs, double scale);

  c10::ScalarType type() const { return type_; }
  // The elements' first byte when they are one run; else null.
  uint8_t* single_run() const;
  double scale() const { return scale_; }
  size_t elem_size() const { return esz_; }
  size_t total() const { return total_; }

  // f(pointer, elements of the range before it, count) for each run's share
  // of the elements [first, first + len).
  template <typename F>
  void each(size_t first, size_t len, F&& f) const {
    if (!runs_) {
      if (len) f(one_.data + first * esz_, size_t{0}, len);
      return;
    }
    size_t k = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin()) - 1;
    for (size_t done = 0; done < len; ++k) {
      const size_t off = first + done - starts_[k];
      const size_t n = std::min((*runs_)[k].count - off, len - done);
      if (n) f((*runs_)[k].data + off * esz_, done, n);
      done += n;
    }
  }
  // dst <- elements [first, first + len), scaled; streamed where `how`
  // says so and there is no scale.
  void read(uint8_t* dst, size_t first, size_t len, WriteMode how = WriteMode::Cached) const;
  // dst <- elements [first, first + len) as they are (no scale).
  void copy_out(uint8_t* dst, size_t first, size_t len, WriteMode how) const;
  // Every element <- itself, scaled.
  void scale_in_place() const;
  // Elements [first, first + len) <- src.
  void write(size_t first, size_t len, const uint8_t* src) const;
  // acc <- the elements [first, first + len), scaled, op `b`.
  void combine_with(ReduceKind kind, uint8_t* acc, size_t first, size_t len, const uint8_t* b) const;
  // The same with the elements as acc.
  void combine_in_place(ReduceKind kind, size_t first, size_t len, const uint8_t* b) const;
  // Elements [first, first + len) <- themselves op `b` (no scale).
  void accumulate_in_place(ReduceKind kind, size_t first, size_t len, const uint8_t* b) const;

 private:
  c10::ScalarType type_;
  size_t esz_;
  size_t total_ = 0;
  Run one_{nullptr, 0};
  const std::vector<Run>* runs_ = nullptr;  // null: one_ is the only run
  std::vector<size_t> starts_;              // each run's first element
  double scale_ = 1;                        // 1: none
};

class LocalCollectives {
 public:
  // A broadcast of at most `post_bytes` (none where 0) is posted by its root: the root
  // writes it and returns without waiting for the peers (Segment::post), as
  // MPI's eager sends do. On 2 ranks of a Zen 5 VM posting took 4 B to
  // 256 B from 0.56-0.58 us to 0.42-0.44 (p50); from 1 KiB up it gained
  // nothing or lost while the root waited for every peer to reach its
  // previous call (1 KiB: 0.43-0.67 against 0.58-0.59). With the ring it
  // gains up to 4 KiB (EPYC VM, 2 ranks, p50 against not posting: 1 KiB
  // 0.14 us against 0.19-0.20, 4 KiB 0.20-0.23 against 0.26; MPICH 0.15-0.17
  // and 0.17-0.20). Letting the root run calls ahead (the post ring,
  // Segment::kPostDepth) took 4 B on 2 ranks of an EPYC VM from
  // 0.20-0.22 us (one call: DDP_SHM_POST_RING=1) to 0.12-0.13 (MPICH:
  // 0.11-0.15 in the same runs); 8 calls ahead took 0.60 to 0.36-0.40 in
  // one of the VM's slow stretches.
  static constexpr size_t kPostBytes = Segment::kPostBytes;
  // `writes`: every call that chooses writes so (for measuring); none: the
  // way local rank 0 measures faster (write_mode.h).
  LocalCollectives(std::unique_ptr<Segment> segment, size_t post_bytes = kPostBytes,
                   std::optional<WriteMode> writes = std::nullopt);

  Segment& segment() { return *seg_; }

  // A shared bucket: memory every rank of the segment maps, rank r's own
  // copy at the same offset in its part. An all-reduce of a tensor that
  // lies in this rank's part combines straight from every rank's copy and
  // writes each chunk's result into all of them: each byte is read once and
  // written once per rank, where a reduce through the slots copies it in,
  // combines and copies it out again (2.5 reads and 2 writes per byte on 2
  // ranks). `memory` holds rank r's part at memory->slot(r, 0); `id` is the
  // same on every rank (the order the buckets were made in). Held weakly:
  // the bucket's tensor owns it.
  void add_shared(const std::shared_ptr<Segment>& memory, uint16_t id);

  // All-reduce (root < 0) or reduce to local rank `root`, in place, with
  // the same bits as Gloo's all-reduce (ring_order.h). Non-root ranks of a
  // reduce keep their input.
  void reduce(const Elements& x, ReduceKind kind, int root, const Deadline& deadline, const char* op);
  void reduce(const at::Tensor& t, ReduceKind kind, int root, const Deadline& deadline, const char* op) {
    reduce(Elements(t), kind, root, deadline, op);
  }
  // A root of at most post_bytes returns once its data is posted.
  void broadcast(const at::Tensor& t, int root, const Deadline& deadline, const char* op);
  // Rank r's `in` lands at dst[r] (in.nbytes() bytes each).
  void all_gather(const at::Tensor& in, const std::vector<uint8_t*>& dst, const Deadline& deadline);
  void barrier(const Deadline& deadline);

 private:
  enum CallKind : uint32_t { kAllReduce = 1, kReduce, kBroadcast, kAllGather, kBarrier, kAllReduceShared };
  struct Shared {
    std::weak_ptr<Segment> memory;
    const uint8_t* begin;  // this rank's part
    size_t bytes;
    uint16_t id;
  };
  // The shared bucket that holds `bytes` bytes from `p` (pruning dropped
  // ones), or none.
  std::optional<std::pair<std::shared_ptr<Segment>, Shared>> shared_holding(const uint8_t* p, size_t bytes);
  void reduce_shared(Segment& memory, size_t offset, const Elements& x, ReduceKind kind, const Deadline& deadline,
                     const char* op);
  static std::string describe(const Segment::Call& c);
  // Segment::Call::what: the kind, the reduce op + 1 and the root + 1 (a
  // shared bucket's id + 1), as describe() reads them.
  static uint32_t what(CallKind kind, int reduce_op, int root);
  static Segment::Call call(CallKind kind, int reduce_op, c10::ScalarType type, size_t count, int root);
  // Publishes this rank's call (Segment::announce). Where that throws (the
  // rank's posted call before it did not match), the call still takes its
  // half, as the peers' calls, failing in their barrier, did.
  void announce(CallKind kind, int reduce_op, const at::Tensor* t, int root, const Deadline& deadline,
                const char* op);
  void announce(CallKind kind, int reduce_op, c10::ScalarType type, size_t count, int root,
                const Deadline& deadline, const char* op);
  void announce(const Segment::Call& c, const Deadline& deadline, const char* op);
  // Every call takes exactly one half before its first barrier, used or
  // not: where the ranks' calls differ, that barrier throws on all of them,
  // and they must still agree on the next call's half.
  int next_half() { return static_cast<int>(pieces_++ & 1); }
  void reduce_whole(const Elements& x, ReduceKind kind, bool keep, const Deadline& deadline, const char* op);
  // A call that chooses how it writes what its peers read (write_mode.h),
  // from kTunedBytes on.
  static constexpr size_t kTunedBytes = size_t{16} << 10;
  struct Tuning {
    uint64_t number;  // among the tuned calls: which advice word rules it
    int cls;          // write_class
    bool tuned;       // at least kTunedBytes: counted, and made as published
    WriteMode how;
    bool timed;       // local rank 0, where nothing is forced
    Clock::time_point began{}, arrived{};
    Clock::duration own{};  // rank 0's work before the first barrier
  };
  // At the call's start: how it writes, as forced or as rank 0 published.
  Tuning tuning(Tuned kind, size_t bytes) const;
  // The call's first barrier: counts the call on every rank that passes it,
  // and stops rank 0's clock while it waits for ranks that came late, which
  // says nothing of the mode.
  void first_barrier(Tuning& t, const Deadline& deadline, const char* op);
  // Rank 0 at the call's end: records it and publishes the mask for the
  // tuned call two after it.
  void tuned_call_done(const Tuning& t, size_t bytes);

  std::unique_ptr<Segment> seg_;
  uint64_t pieces_ = 0;
  // Tuned calls every rank entered (passed the first barrier of): the
  // numbers that pick the advice words (write_mode.h).
  uint64_t tuned_calls_ = 0;
  // Broadcasts copied between the ranks' tensors: their write windows' numbers.
  uint64_t copied_broadcasts_ = 0;
  WriteModeChooser chooser_;  // local rank 0's
  std::optional<WriteMode> writes_;
  size_t whole_bytes_;  // up to this size, reduce_whole
  size_t post_bytes_;   // up to this size, a broadcast's root posts
  std::mutex shared_mutex_;  // buckets are added on the caller's thread, used on the executor's
  std::vector<Shared> shared_;
  std::atomic<bool> any_shared_{false};  // lets every reduce of a group without them skip the lock
};

}  // namespace ddp::core::shm
