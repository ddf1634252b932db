#include "memory/host_cache.h"

#include <c10/core/CPUAllocator.h>
#include <pthread.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
// A cached block is poisoned, so a use after free stays an ASan report
// although the memory was never returned to ASan's allocator.
#define DDP_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define DDP_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define DDP_POISON(p, n) ((void)(p), (void)(n))
#define DDP_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace ddp::core {
namespace {

constexpr size_t kGranule = 4096;   // sizes are rounded to pages, so near sizes share blocks
constexpr size_t kAlignment = 64;   // c10's gAlignment

class HostBlockCache final : public c10::Allocator {
 public:
  static HostBlockCache& instance() {
    // Never destroyed: tensors may outlive main's return and still call release.
    static HostBlockCache* cache = new HostBlockCache();
    return *cache;
  }

  c10::DataPtr allocate(size_t n) override {
    if (n < kSmallestCachedBytes || !fallback_.load()) return fallback().allocate(n);
    size_t size = (n + kGranule - 1) / kGranule * kGranule;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end()) {
        void* p = it->second.back()->p;  // the newest of its size: the likeliest still in cache
        order_.erase(it->second.back());
        it->second.pop_back();
        if (it->second.empty()) free_.erase(it);
        cached_bytes_ -= size;
        ++reused_;
        live_[p] = size;
        DDP_UNPOISON(p, size);
        return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
      }
      ++allocated_;
    }
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, size) != 0) {
      TORCH_CHECK_WITH(OutOfMemoryError, false, "libddp host cache: could not allocate ", size, " bytes");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      live_[p] = size;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, size_t count) const override { default_copy_data(dest, src, count); }

  bool install(size_t limit) {
    std::lock_guard<std::mutex> lock(install_mu_);
    if (uses_ > 0) {
      ++uses_;
      return true;
    }
    c10::Allocator* current = c10::GetCPUAllocator();
    if (current != this) fallback_ = current;  // never itself: small requests would come back here
    {
      std::lock_guard<std::mutex> lock2(mu_);
      limit_ = limit;
    }
    c10::SetCPUAllocator(this, 0);
    if (c10::GetCPUAllocator() != this) return false;  // one of higher priority stays
    ++uses_;
    return true;
  }

  void remove() {
    std::lock_guard<std::mutex> lock(install_mu_);
    if (uses_ == 0 || --uses_ > 0) return;
    if (c10::GetCPUAllocator() == this) c10::SetCPUAllocator(fallback_.load(), 0);
    std::vector<std::pair<void*, size_t>> drop;
    {
      std::lock_guard<std::mutex> lock2(mu_);
      limit_ = 0;  // blocks released from now on go straight back
      for (const Cached& b : order_) drop.emplace_back(b.p, b.size);
      order_.clear();
      free_.clear();
      cached_bytes_ = 0;
    }
    for (auto& [p, size] : drop) {
      DDP_UNPOISON(p, size);
      std::free(p);
    }
  }

  HostCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    HostCacheStats s;
    s.installed = c10::GetCPUAllocator() == this;
    s.cached_bytes = cached_bytes_;
    s.reused = reused_;
    s.allocated = allocated_;
    return s;
  }

 private:
  HostBlockCache() {
    // A fork while another thread holds mu_ would leave the child's copy
    // locked forever: hold it across fork, as malloc does its own locks.
    pthread_atfork([] { instance().mu_.lock(); }, [] { instance().mu_.unlock(); },
                   [] { instance().mu_.unlock(); });
  }

  // The deleter of every block the cache handed out; raw_deallocate may also
  // pass a small block the fallback allocated (raw_deleter is the cache's).
  static void release(void* p) {
    HostBlockCache& c = instance();
    size_t size = 0;
    bool keep = false;
    std::vector<Cached> evicted;
    {
      std::lock_guard<std::mutex> lock(c.mu_);
      auto it = c.live_.find(p);
      if (it != c.live_.end()) {
        size = it->second;
        c.live_.erase(it);
        keep = size <= c.limit_;
        if (keep) {
          // Room for the newest block, made from the oldest: sizes a
          // program stopped asking for (another batch size, an evaluation)
          // leave the cache instead of filling it for good.
          while (c.cached_bytes_ + size > c.limit_) evicted.push_back(c.evict_oldest());
          DDP_POISON(p, size);  // before another thread can take it
          c.free_[size].push_back(c.order_.insert(c.order_.end(), Cached{p, size}));
          c.cached_bytes_ += size;
        }
      }
    }
    for (const Cached& e : evicted) {
      DDP_UNPOISON(e.p, e.size);
      std::free(e.p);
    }
    if (size == 0) {
      c.fallback().raw_deleter()(p);
    } else if (!keep) {
      std::free(p);
    }
  }

  struct Cached {
    void* p;
    size_t size;
  };

  // The allocator installed before the cache (c10's default if none was).
  c10::Allocator& fallback() const {
    c10::Allocator* f = fallback_.load();
    return f ? *f : *c10::GetDefaultCPUAllocator();
  }

  // Takes the block cached longest out of the cache; mu_ held, cache not empty.
  Cached evict_oldest() {
    Cached oldest = order_.front();
    auto same_size = free_.find(oldest.size);
    same_size->second.erase(same_size->second.begin());  // oldest first within a size too
    if (same_size->second.empty()) free_.erase(same_size);
    order_.pop_front();
    cached_bytes_ -= oldest.size;
    return oldest;
  }

  std::mutex install_mu_;  // install and remove
  int uses_ = 0;
  std::atomic<c10::Allocator*> fallback_{nullptr};  // the allocator installed before; read unlocked

  std::mutex mu_;  // everything below
  size_t limit_ = 0;
  size_t cached_bytes_ = 0;
  uint64_t reused_ = 0, allocated_ = 0;
  std::list<Cached> order_;  // every cached block, oldest first
  // By rounded size, oldest first; a size with no block has no entry.
  std::unordered_map<size_t, std::vector<std::list<Cached>::iterator>> free_;
  std::unordered_map<void*, size_t> live_;               // handed out, by address
};

}  // namespace

size_t host_cache_limit_from_env() {
  const char* v = std::getenv("DDP_HOST_CACHE_MB");
  if (!v || !*v) return kDefaultHostCacheBytes;
  char* end = nullptr;
  errno = 0;
  unsigned long long mb = std::strtoull(v, &end, 10);
  // Digits only: strtoull alone would take " -1" as a huge number.
  check_arg(std::isdigit(static_cast<unsigned char>(*v)) && *end == '\0' && errno == 0 && mb <= (SIZE_MAX >> 20),
            std::string("DDP_HOST_CACHE_MB='") + v + "' is not a size in MiB (0 turns the host cache off)");
  return static_cast<size_t>(mb) << 20;
}

HostCacheUse::HostCacheUse(size_t limit_bytes) {
  if (limit_bytes > 0) active_ = HostBlockCache::instance().install(limit_bytes);
}

HostCacheUse::~HostCacheUse() {
  if (active_) HostBlockCache::instance().remove();
}

HostCacheStats host_cache_stats() { return HostBlockCache::instance().stats(); }

}  // namespace ddp::core
