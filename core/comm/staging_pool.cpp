#include "comm/staging_pool.h"

#include <ATen/ops/empty.h>

namespace ddp::core {
namespace {
// Only the pool's own handle refers to its storage: what goes out is always
// a view (a tensor of its own), which counts.
bool idle(const at::Tensor& t) { return t.storage().use_count() == 1; }
}  // namespace

at::Tensor StagingPool::bytes(size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  at::Tensor* best = nullptr;           // the smallest idle one large enough
  at::Tensor* smallest_idle = nullptr;  // replaced when none is
  for (auto& t : kept_) {
    if (!idle(t)) continue;
    if (static_cast<size_t>(t.numel()) >= nbytes && (!best || t.numel() < best->numel())) best = &t;
    if (!smallest_idle || t.numel() < smallest_idle->numel()) smallest_idle = &t;
  }
  if (best) return best->narrow(0, 0, static_cast<int64_t>(nbytes));
  at::Tensor fresh = at::empty({static_cast<int64_t>(nbytes)}, at::TensorOptions().dtype(at::kByte));
  if (kept_.size() < kMostKept) kept_.push_back(fresh);
  else if (smallest_idle) *smallest_idle = fresh;
  return fresh.narrow(0, 0, static_cast<int64_t>(nbytes));
}

size_t StagingPool::held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const auto& t : kept_) n += static_cast<size_t>(t.numel());
  return n;
}

}  // namespace ddp::core
