// The communication hook slot of the reducer (PyTorch's register_comm_hook).
// A hook receives a bucket's flat buffer and starts its reduction; whatever
// it leaves in the buffer when its Pending completes becomes the gradients.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "comm/collectives.h"

namespace ddp {

struct BucketView {
  at::Tensor flat;    // the bucket's gradients, one flat buffer (in place)
  size_t index = 0;   // bucket index
  bool is_last = false;
  int divisor = 1;    // ranks whose gradients are averaged (the group size, or the ranks not joined)
};

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual PendingPtr run(Group& group, const BucketView& bucket) = 0;
};

// PyTorch's allreduce_hook: divide by the group size, then SUM.
std::shared_ptr<CommHook> make_allreduce_hook();

}  // namespace ddp
