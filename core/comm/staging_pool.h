// The buffers a group stages caller memory in (comm/caller_memory.h; the
// shm backend's step between nodes keeps its own), kept for its next calls: a fresh allocation of a large buffer is served by new
// mappings, whose page faults cost more than the copy itself (a 64 MiB Gloo
// all-reduce took 82 ms against 35 ms with a fresh buffer per call, on our
// 2-core VM). A buffer goes out again only when nothing else holds its
// storage: a backend still at work on it after a failed wait keeps it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <mutex>
#include <vector>

namespace ddp::core {

class StagingPool {
 public:
  // `nbytes` bytes (or more) of host memory as a 1-D byte tensor, not
  // zeroed: an idle kept buffer when one is large enough, else a new one,
  // which is kept in place of the smallest idle one.
  at::Tensor bytes(size_t nbytes);
  // A buffer from bytes() seen as `t`'s dtype and shape (contiguous), not
  // filled.
  at::Tensor like(const at::Tensor& t) { return bytes(t.nbytes()).view(t.scalar_type()).view(t.sizes()); }
  // What the pool holds, in bytes (idle or in use).
  size_t held() const;

 private:
  static constexpr size_t kMostKept = 4;  // an all_gather_into stages two; room for a stuck one
  mutable std::mutex mutex_;
  std::vector<at::Tensor> kept_;
};

}  // namespace ddp::core
