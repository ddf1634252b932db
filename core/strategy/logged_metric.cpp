#include "strategy/logged_metric.h"

#include <ATen/Functions.h>

#include <limits>
#include <string>

#include "comm/collectives.h"
#include "comm/group.h"
#include "common/error.h"

namespace ddp::core {

LoggedMetric::LoggedMetric(Reduce reduce) : reduce_(reduce) { reset(); }

void LoggedMetric::reset() {
  // Lightning's defaults: -inf for max, +inf for min, else 0.
  const float start = reduce_ == Reduce::Max   ? -std::numeric_limits<float>::infinity()
                      : reduce_ == Reduce::Min ? std::numeric_limits<float>::infinity()
                                               : 0.0f;
  value_ = at::scalar_tensor(start, at::kFloat);
  batch_count_ = at::scalar_tensor(0, at::kLong);
  updates_ = 0;
}

void LoggedMetric::update(double value, int64_t batch_size) {
  check_arg(batch_size >= 0, "metric update: batch size " + std::to_string(batch_size) + " is negative");
  const at::Tensor v = at::scalar_tensor(value, at::kFloat);
  switch (reduce_) {
    case Reduce::Mean:
      // `value + v * batch_size` in float32, and the count in int64, as Lightning.
      value_ = value_ + v * batch_size;
      batch_count_ = batch_count_ + batch_size;
      break;
    case Reduce::Sum: value_ = value_ + v; break;
    case Reduce::Max: value_ = at::max(value_, v); break;
    case Reduce::Min: value_ = at::min(value_, v); break;
  }
  ++updates_;
}

double LoggedMetric::compute(Group* group, at::Device device) const {
  at::Tensor value = value_.to(device, /*non_blocking=*/false, /*copy=*/true);
  at::Tensor count = batch_count_.to(device, /*non_blocking=*/false, /*copy=*/true);
  if (group && group->size() > 1) {
    const int world = group->size();
    switch (reduce_) {
      case Reduce::Mean:
        // _sync_ddp(reduce_op="mean") on Gloo: a sum divided by the world
        // size; an integer tensor's quotient is copied back into it.
        all_reduce_blocking(*group, value, ReduceOp::Sum);
        value.div_(world);
        all_reduce_blocking(*group, count, ReduceOp::Sum);
        count.copy_(count / world);
        break;
      case Reduce::Sum: all_reduce_blocking(*group, value, ReduceOp::Sum); break;
      case Reduce::Max: all_reduce_blocking(*group, value, ReduceOp::Max); break;
      case Reduce::Min: all_reduce_blocking(*group, value, ReduceOp::Min); break;
    }
  }
  if (reduce_ == Reduce::Mean) value = value / count;
  return value.item<double>();
}

}  // namespace ddp::core
