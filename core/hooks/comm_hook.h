// The comm hook interface (PyTorch's register_comm_hook): what a hook gets
// (a BucketView), what it returns (a Pending), helpers for writing one, and
// PyTorch's default allreduce hook. A hook receives a bucket's flat buffer
// and starts its reduction; whatever it leaves in the buffer when its
// Pending completes becomes the gradients. The other hooks live beside it in
// hooks/.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <mutex>

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

  // What the hook keeps between steps, for checkpoints: a dict with its
  // "kind" and tensors and numbers (None for a hook that keeps nothing).
  virtual c10::IValue state_dict() const { return c10::IValue(); }
  // Status::IO naming what in `saved` (a state_dict() of this kind of hook;
  // None: nothing saved, the hook starts afresh) does not fit this hook.
  virtual void check_state_dict(const c10::IValue& saved) const;
  // After check_state_dict: the hook goes on from `saved`.
  virtual void load_state_dict(const c10::IValue& saved) { (void)saved; }

  // A hook that keeps state between steps (PowerSGD's per-bucket memories,
  // post-local SGD's step count) serves one reducer at a time: two would
  // interleave their buckets and steps in one state, and their training
  // would drift from PyTorch's without a word. attach: Status::State while
  // another reducer holds such a hook; detach: that reducer lets it go (its
  // end, or another hook set), after which another may take it. The same
  // reducer may hold it more than once (through two wrappers of it while
  // it swaps one for the other); it lets it go at its last detach.
  virtual void attach(const void* reducer);
  virtual void detach(const void* reducer) noexcept;

 protected:
  // The hook's name in messages when it keeps state between steps; nullptr
  // for a hook that keeps none (any number of reducers may share it).
  virtual const char* stateful_kind() const { return nullptr; }

 private:
  std::mutex holder_mutex_;
  const void* holder_ = nullptr;
  int holds_ = 0;  // the holder's attaches not yet detached
};

// For the hooks' state dicts: the dict `saved` of a hook of `kind`
// (Status::IO naming both kinds otherwise), and its entries.
c10::impl::GenericDict hook_state_of(const c10::IValue& saved, const std::string& kind);
const c10::IValue& hook_state_entry(const c10::impl::GenericDict& d, const std::string& kind, const char* key);
int64_t hook_state_int(const c10::impl::GenericDict& d, const std::string& kind, const char* key);

// PyTorch's allreduce_hook: divide by the group size, then SUM.
std::shared_ptr<CommHook> make_allreduce_hook();

// Runs `inner` and then `after` (on the waiting thread) when it completes.
PendingPtr then(Group& group, const char* op, PendingPtr inner, std::function<void()> after);

}  // namespace ddp::core