#include "hooks/powersgd_state.h"

#include <ATen/ops/zeros_like.h>

#include <algorithm>

namespace ddp::core::powersgd {

void StatefulHook::add_error(size_t bucket, const at::Tensor& input) {
  BucketMemory& mem = memory_[bucket];
  if (mem.error.defined()) {
    input.add_(mem.error);
  } else {
    mem.error = at::zeros_like(input);
  }
}

PendingPtr StatefulHook::allreduce_average(Group& group, const BucketView& bucket) {
  end_of_bucket(bucket.is_last);
  return divide_then_sum(group, bucket.flat, bucket.divisor);
}

void wait_until(Pending& p, Clock::time_point deadline) {
  p.wait(std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now())));
}

}  // namespace ddp::core::powersgd
