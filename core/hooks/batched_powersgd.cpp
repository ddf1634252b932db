// PyTorch's batched_powerSGD_hook: the whole bucket, zero-padded to a
// square matrix, is compressed at once. Faster than the per-tensor hook and
// usually much less accurate above rank 1.
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>

#include "hooks/powersgd_math.h"
#include "hooks/powersgd_state.h"

namespace ddp::core::powersgd {
namespace {

constexpr uint64_t kSeedBound = 1000000000;

class BatchedHook : public StatefulHook {
 public:
  explicit BatchedHook(const PowerSgdOptions& opts) : StatefulHook(opts, "batched PowerSGD") {}

  PendingPtr run(Group& group, const BucketView& bucket) override {
    if (!compressing()) return allreduce_average(group, bucket);
    const int64_t total = bucket.flat.numel();
    const int64_t side = int64_t(std::ceil(std::sqrt(double(total))));
    // PyTorch uses the rank as given; a rank above the side cannot be orthogonal.
    const int64_t r = std::max<int64_t>(1, std::min(opts_.matrix_approximation_rank, side));
    count(total, side * r * 2);
    // PyTorch resizes the bucket itself; a padded copy leaves the bucket's storage alone.
    at::Tensor input = at::zeros({side * side}, bucket.flat.options());
    input.narrow(0, 0, total).copy_(bucket.flat);
    at::Tensor input_copy;
    if (opts_.use_error_feedback) {
      add_error(bucket.index, input);
      input_copy = input.clone();
    }
    at::Tensor matrix = input.view({side, side});
    BucketMemory& mem = place(bucket.index, input);
    if (!opts_.warm_start || !mem.p.defined()) {
      mem.p = at::empty({side, r}, input.options());
      mem.q = SeededNormal(seeds_.randint(kSeedBound)).draw({side, r}, input);
    } else {
      check_memory_fits(bucket.index, "p", mem.p, {side, r});
      check_memory_fits(bucket.index, "q", mem.q, {side, r});
    }
    orthogonalize(mem.q.unsqueeze(0), opts_.orthogonalization_epsilon);
    at::mm_out(mem.p, matrix, mem.q);
    auto p_reduce = std::shared_ptr<Pending>(all_reduce(group, mem.p, ReduceOp::Sum));
    at::Tensor flat = bucket.flat;
    const size_t index = bucket.index;
    const bool is_last = bucket.is_last;
    const int divisor = bucket.divisor;
    return std::make_unique<Pending>(
        group, "batched PowerSGD", nullptr,
        [this, &group, p_reduce, input, input_copy, matrix, flat, total, index, is_last, divisor](
            Pending&, Clock::time_point deadline) mutable {
          BucketMemory& m = memory_[index];
          wait_until(*p_reduce, deadline);
          orthogonalize(m.p.unsqueeze(0), opts_.orthogonalization_epsilon);
          at::mm_out(m.q, matrix.t(), m.p);
          wait_until(*all_reduce(group, m.q, ReduceOp::Sum), deadline);
          m.q.div_(divisor);
          at::mm_out(matrix, m.p, m.q.t());
          if (opts_.use_error_feedback) m.error = input_copy - input;
          if (!opts_.warm_start) {
            m.p = at::Tensor();
            m.q = at::Tensor();
          }
          flat.copy_(input.narrow(0, 0, total));
          end_of_bucket(is_last);
        });
  }
};

}  // namespace

std::shared_ptr<PowerSgdHook> make_batched_hook(const PowerSgdOptions& opts) {
  return std::make_shared<BatchedHook>(opts);
}

}  // namespace ddp::core::powersgd
