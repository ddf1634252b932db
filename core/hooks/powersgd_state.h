// What both PowerSGD hooks keep between steps: the step count, the
// compression statistics, the seed stream, and per bucket the error-feedback
// residual and the P/Q memories (warm start).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <mutex>

#include "hooks/legacy_seed_stream.h"
#include "hooks/powersgd.h"

namespace ddp::core::powersgd {

struct BucketMemory {
  at::Tensor error;  // local residual of the last compression (error feedback)
  at::Tensor p, q;   // low-rank factors, reused as the next step's start (warm start)
};

class StatefulHook : public PowerSgdHook {
 public:
  StatefulHook(const PowerSgdOptions& opts, std::string kind) : opts_(opts), seeds_(opts.random_seed), kind_(std::move(kind)) {}
  CompressionStats stats() const override {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    return stats_;
  }

  // PowerSGDState's state between steps: the step count, the compression
  // statistics, the seed stream, and per bucket the error-feedback residual
  // and the P and Q memories (warm start). A resumed run compresses as an
  // uninterrupted one does, given the same buckets.
  c10::IValue state_dict() const override;
  void check_state_dict(const c10::IValue& saved) const override;
  void load_state_dict(const c10::IValue& saved) override;

 protected:
  const char* stateful_kind() const override { return kind_.c_str(); }
  bool compressing() const { return iter_ >= opts_.start_powersgd_iter; }
  // PyTorch's maybe_increase_iter: a step ends with its last bucket.
  void end_of_bucket(bool is_last) {
    if (!is_last) return;
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.iteration = ++iter_;
  }
  void count(int64_t before, int64_t after) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.numel_before += uint64_t(before);
    stats_.numel_after += uint64_t(after);
  }
  // Bucket `bucket`'s memory, on the device of `like` (restored memories
  // come from a checkpoint on the CPU).
  BucketMemory& place(size_t bucket, const at::Tensor& like);
  // Adds the residual into `input` (creating a zero one on first use).
  void add_error(size_t bucket, const at::Tensor& input);
  // Status::IO unless bucket `bucket`'s memory `what` ("error", "p", "q")
  // has the shape `want` this bucket needs. Memories restored from a
  // checkpoint of other buckets (another bucket_cap_mb or model) were
  // otherwise broadcast into the bucket (a residual of one element) or
  // narrowed to it without a word, or failed deep inside an operator; so
  // were those of a reducer the hook served before (freed since).
  void check_memory_fits(size_t bucket, const char* what, const at::Tensor& have, at::IntArrayRef want) const;
  // Plain all-reduce average before the start step (PyTorch's _allreduce_fut).
  PendingPtr allreduce_average(Group& group, const BucketView& bucket);

  PowerSgdOptions opts_;
  LegacySeedStream seeds_;
  std::map<size_t, BucketMemory> memory_;

 private:
  // The saved buckets, checked against what this hook holds.
  std::map<size_t, BucketMemory> read_memory(const c10::impl::GenericDict& d) const;

  std::string kind_;  // "PowerSGD" or "batched PowerSGD": their memories differ in shape
  int64_t iter_ = 0;
  mutable std::mutex stats_mutex_;  // stats() may be read from another thread
  CompressionStats stats_;
};

// Waits for `p` within what is left until `deadline`.
void wait_until(Pending& p, Clock::time_point deadline);

}  // namespace ddp::core::powersgd
