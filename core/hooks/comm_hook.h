// The comm hook interface (PyTorch's register_comm_hook): what a hook gets
// (a BucketView), what it returns (a Pending), helpers for writing one, and
// PyTorch's default allreduce hook. A hook receives a bucket's flat buffer
// and starts its reduction; whatever it leaves in the buffer when its
// Pending completes becomes the gradients. The other hooks live beside it in
// hooks/.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "comm/collectives.h"

namespace ddp::core {

struct BucketView {
  at::Tensor flat;    // the bucket's gradients, one flat buffer (in place)
  size_t index = 0;   // bucket index
  bool is_last = false;
  int divisor = 1;    // ranks whose gradients are averaged (the group size, or the ranks not joined)
  // Per gradient in the bucket: its parameter index, element offset in
  // `flat`, and shape (for hooks that treat each gradient as a matrix).
  std::vector<size_t> param_indices;
  std::vector<int64_t> offsets;
  std::vector<std::vector<int64_t>> shapes;
};

// A Pending that is already complete (hooks that do not communicate).
PendingPtr completed(Group& group, const char* op);

class CommHook {
 public:
  virtual ~CommHook() = default;
  virtual PendingPtr run(Group& group, const BucketView& bucket) = 0;
};

// PyTorch's allreduce_hook: divide by the group size, then SUM.
std::shared_ptr<CommHook> make_allreduce_hook();

// Runs `inner` and then `after` (on the waiting thread) when it completes.
PendingPtr then(Group& group, const char* op, PendingPtr inner, std::function<void()> after);

}  // namespace ddp::core