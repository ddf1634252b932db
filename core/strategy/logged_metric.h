// One value a Lightning script logs with self.log(name, value, on_epoch=True,
// reduce_fx=..., sync_dist=...): Lightning's accumulation over the epoch's
// batches and its epoch-end value, reduced over the ranks with sync_dist.
// The arithmetic is Lightning's own (pytorch_lightning's _ResultMetric and
// lightning_fabric's _sync_ddp), so the value equals what Lightning logs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace ddp::core {

class Group;

class LoggedMetric {
 public:
  enum class Reduce { Mean, Sum, Max, Min };
  explicit LoggedMetric(Reduce reduce);

  // One batch's value (stored as float32, as Lightning stores a logged
  // Python float) and its batch size (the mean's weight). Status::
  // InvalidArgument for a negative batch size.
  void update(double value, int64_t batch_size);
  // The epoch's value. With a group (sync_dist), a collective: every rank
  // of it must call it. Mean is Lightning's: the ranks' weighted sums and
  // their batch counts are each averaged over the ranks, the count in
  // int64 as Lightning's _sync_ddp leaves it (truncated), then divided; so
  // when the total count is not a multiple of the world size, the value
  // is Lightning's, not the exact weighted mean.
  // The collective runs on `device` (the strategy's root device: CUDA
  // tensors for NCCL).
  double compute(Group* group, at::Device device) const;
  // Starts a new epoch.
  void reset();
  int64_t updates() const { return updates_; }

 private:
  Reduce reduce_;
  at::Tensor value_;           // float32, 0-d
  at::Tensor batch_count_;     // int64, 0-d (Mean)
  int64_t updates_ = 0;
};

}  // namespace ddp::core
