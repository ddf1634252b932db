#include "hooks/comm_hook.h"

namespace ddp::core {
namespace {
class AllreduceHook : public CommHook {
 public:
  PendingPtr run(Group& group, const BucketView& bucket) override {
    return divide_then_sum(group, bucket.flat, bucket.divisor);
  }
};
}  // namespace

std::shared_ptr<CommHook> make_allreduce_hook() { return std::make_shared<AllreduceHook>(); }

PendingPtr completed(Group& group, const char* op) { return std::make_unique<Pending>(group, op, nullptr, nullptr); }

PendingPtr then(Group& group, const char* op, PendingPtr inner, std::function<void()> after) {
  auto shared = std::shared_ptr<Pending>(std::move(inner));
  return std::make_unique<Pending>(group, op, nullptr, [shared, after](Pending&, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    shared->wait(std::max(Millis(0), left));
    after();
  });
}

}  // namespace ddp::core