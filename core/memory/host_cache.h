// A cache of large host blocks for torch's CPU tensors, installed as
// c10's CPU allocator while a CPU strategy is set up.
//
// Why: a training step frees and allocates the same large tensors every
// step (activations, gradients, buckets). glibc serves blocks above its mmap
// threshold with fresh mappings and hands the top of its heap back to the
// kernel past its trim threshold, so every step pays the page faults and the
// zeroing of those pages again. Measured on the conv benchmark
// (bench/run_strategy_step.sh): about a third of the single-process step.
// The cache keeps freed blocks of kSmallestCachedBytes and more, by size, up
// to a byte limit (making room by freeing the blocks cached longest), and
// hands one back for the next request of that size. Smaller requests go to
// the allocator that was installed before (c10's default).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ddp::core {

constexpr size_t kSmallestCachedBytes = size_t{128} << 10;  // glibc's initial mmap threshold

struct HostCacheStats {
  bool installed = false;
  size_t cached_bytes = 0;  // held in the cache, free for reuse
  uint64_t reused = 0;      // requests served from the cache
  uint64_t allocated = 0;   // requests of cacheable size that needed new memory
};

// The limit the environment asks for: DDP_HOST_CACHE_MB (MiB; 0 turns the
// cache off), else kDefaultHostCacheBytes. A value that is not a
// non-negative integer is an InvalidArgument naming the variable.
constexpr size_t kDefaultHostCacheBytes = size_t{2} << 30;
size_t host_cache_limit_from_env();

// Holds the cache installed for its lifetime. Uses nest: the cache stays
// installed until the last one ends, with the limit the first one set. A
// limit of 0 installs nothing. When the last use ends, torch's previous CPU
// allocator is back and the cached blocks are freed; tensors still alive
// return their blocks straight to the system later.
class HostCacheUse {
 public:
  explicit HostCacheUse(size_t limit_bytes);
  ~HostCacheUse();
  HostCacheUse(const HostCacheUse&) = delete;
  HostCacheUse& operator=(const HostCacheUse&) = delete;
  // False when the limit was 0 or another CPU allocator of higher priority
  // is installed (then torch's allocator serves as before).
  bool active() const { return active_; }

 private:
  bool active_ = false;
};

HostCacheStats host_cache_stats();

}  // namespace ddp::core
