#include "ddp/comm_hook_slot.h"

namespace ddp {
namespace {
class AllreduceHook : public CommHook {
 public:
  PendingPtr run(Group& group, const BucketView& bucket) override {
    bucket.flat.div_(bucket.divisor);
    return all_reduce(group, bucket.flat, ReduceOp::Sum);
  }
};
}  // namespace

std::shared_ptr<CommHook> make_allreduce_hook() { return std::make_shared<AllreduceHook>(); }

}  // namespace ddp
