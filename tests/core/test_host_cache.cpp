// The host block cache (core/memory/host_cache.h) as torch's CPU allocator:
// reuse by size, the limit, small blocks left to torch, nesting, removal,
// the environment's limit, and (under ASan) that a cached block is poisoned.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "common/error.h"
#include "memory/host_cache.h"

using namespace ddp::core;

namespace {
constexpr size_t kMiB = size_t{1} << 20;

at::Tensor floats(size_t bytes) { return at::empty({static_cast<int64_t>(bytes / sizeof(float))}, at::kFloat); }
}  // namespace

TEST(HostCache, AFreedBlockServesTheNextRequestOfItsSize) {
  HostCacheUse use(64 * kMiB);
  ASSERT_TRUE(use.active());
  auto before = host_cache_stats();
  auto t = floats(4 * kMiB);
  void* first = t.data_ptr();
  t.fill_(3.0f);
  t.reset();
  EXPECT_EQ(host_cache_stats().cached_bytes, before.cached_bytes + 4 * kMiB);
  auto u = floats(4 * kMiB);
  EXPECT_EQ(u.data_ptr(), first);
  EXPECT_EQ(host_cache_stats().reused, before.reused + 1);
  EXPECT_EQ(host_cache_stats().cached_bytes, before.cached_bytes);
  // A reused block is an ordinary tensor's memory.
  u.fill_(2.0f);
  EXPECT_EQ(u.sum().item<float>(), 2.0f * static_cast<float>(u.numel()));
}

TEST(HostCache, NearSizesShareABlockWithinAPage) {
  HostCacheUse use(64 * kMiB);
  auto t = at::empty({1 << 18}, at::kFloat);  // 1 MiB
  void* first = t.data_ptr();
  t.reset();
  auto u = at::empty({(1 << 18) - 7}, at::kFloat);  // 28 bytes less: the same page count
  EXPECT_EQ(u.data_ptr(), first);
}

TEST(HostCache, SmallTensorsStayWithTorchsAllocator) {
  HostCacheUse use(64 * kMiB);
  auto before = host_cache_stats();
  for (int i = 0; i < 10; ++i) floats(kSmallestCachedBytes / 2).fill_(1.0f);
  auto after = host_cache_stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.reused, before.reused);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
}

TEST(HostCache, HoldsNoMoreThanItsLimitByFreeingTheBlocksCachedLongest) {
  HostCacheUse use(6 * kMiB);
  auto a = floats(4 * kMiB), b = floats(4 * kMiB), c = floats(2 * kMiB);
  void* newest = b.data_ptr();
  a.reset();
  b.reset();  // a leaves the cache to make room
  EXPECT_EQ(host_cache_stats().cached_bytes, 4 * kMiB);
  c.reset();  // fits beside b
  EXPECT_EQ(host_cache_stats().cached_bytes, 6 * kMiB);
  auto d = floats(4 * kMiB);
  EXPECT_EQ(d.data_ptr(), newest);
  // A size the program stopped asking for does not hold the cache for good.
  auto big = floats(5 * kMiB);
  big.reset();  // c (2 MiB) goes; 5 MiB fit
  EXPECT_EQ(host_cache_stats().cached_bytes, 5 * kMiB);
  auto again = host_cache_stats();
  floats(5 * kMiB).fill_(0.0f);
  EXPECT_EQ(host_cache_stats().reused, again.reused + 1);
  // One larger than the whole limit is never kept.
  floats(8 * kMiB).fill_(0.0f);
  EXPECT_EQ(host_cache_stats().cached_bytes, 5 * kMiB);
}

TEST(HostCache, TheLastUseRestoresTorchsAllocatorAndFreesTheCache) {
  c10::Allocator* torchs = c10::GetCPUAllocator();
  at::Tensor outlives;
  {
    HostCacheUse outer(64 * kMiB);
    {
      HostCacheUse inner(64 * kMiB);
      EXPECT_NE(c10::GetCPUAllocator(), torchs);
    }
    EXPECT_TRUE(host_cache_stats().installed) << "an inner use ended the outer one's cache";
    floats(2 * kMiB).fill_(1.0f);
    EXPECT_GE(host_cache_stats().cached_bytes, 2 * kMiB);
    outlives = floats(3 * kMiB);
  }
  EXPECT_EQ(c10::GetCPUAllocator(), torchs);
  auto s = host_cache_stats();
  EXPECT_FALSE(s.installed);
  EXPECT_EQ(s.cached_bytes, 0u);
  outlives.fill_(1.0f);
  outlives.reset();  // its block goes back to the system, not into a cache nobody uses
  EXPECT_EQ(host_cache_stats().cached_bytes, 0u);
  // Installed again, as a second fit in the same process does.
  HostCacheUse again(64 * kMiB);
  EXPECT_TRUE(again.active());
  EXPECT_TRUE(host_cache_stats().installed);
}

// Threads taking and returning blocks of a few sizes at once: each fills its
// tensors with its own value and reads them back, so a block handed to two
// threads, or reused while still in use, shows as a wrong sum.
TEST(HostCache, ThreadsNeverShareABlock) {
  HostCacheUse use(16 * kMiB);  // small: eviction runs too
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &wrong] {
      for (int i = 0; i < 200; ++i) {
        size_t bytes = (size_t{1} + static_cast<size_t>((i * 7 + t) % 5)) * 256 * 1024;
        auto x = floats(bytes), y = floats(bytes);
        x.fill_(static_cast<float>(t + 1));
        y.fill_(static_cast<float>(-(t + 1)));
        double expected = static_cast<double>(t + 1) * static_cast<double>(x.numel());
        if (x.sum().item<double>() != expected || y.sum().item<double>() != -expected) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(host_cache_stats().reused, 0u);
}

// A fork while another thread is inside the cache: the child's first large
// allocation must not find the cache's lock held forever (ddp_spawn's fork
// start method forks a process that may have trained before).
TEST(HostCache, AChildForkedMidAllocationCanAllocate) {
  HostCacheUse use(16 * kMiB);
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    while (!stop) floats(kMiB + static_cast<size_t>(std::rand() % 4) * 4096).fill_(1.0f);
  });
  int hung = 0;
  for (int i = 0; i < 300 && !hung; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      void* p = c10::GetCPUAllocator()->raw_allocate(2 * kMiB);
      c10::GetCPUAllocator()->raw_deallocate(p);
      _exit(0);
    }
    int status = 0;
    for (int waited_ms = 0; waitpid(pid, &status, WNOHANG) == 0; waited_ms += 5) {
      if (waited_ms > 5000) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        hung = 1;
        break;
      }
      usleep(5000);
    }
    if (!hung) EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i;
  }
  stop = true;
  churn.join();
  EXPECT_EQ(hung, 0) << "a forked child hung on the cache's lock";
}

TEST(HostCache, ALimitOfZeroInstallsNothing) {
  HostCacheUse off(0);
  EXPECT_FALSE(off.active());
  EXPECT_FALSE(host_cache_stats().installed);
}

TEST(HostCache, RawAllocationsOfEitherSizeComeBackThroughItsDeleter) {
  HostCacheUse use(64 * kMiB);
  c10::Allocator* a = c10::GetCPUAllocator();
  void* big = a->raw_allocate(2 * kMiB);
  void* small = a->raw_allocate(64);  // torch's own block, freed by torch's deleter
  auto cached = host_cache_stats().cached_bytes;
  a->raw_deallocate(small);
  a->raw_deallocate(big);
  EXPECT_EQ(host_cache_stats().cached_bytes, cached + 2 * kMiB);
}

TEST(HostCache, TheEnvironmentSetsTheLimitOrIsNamedWhenWrong) {
  unsetenv("DDP_HOST_CACHE_MB");
  EXPECT_EQ(host_cache_limit_from_env(), kDefaultHostCacheBytes);
  setenv("DDP_HOST_CACHE_MB", "0", 1);
  EXPECT_EQ(host_cache_limit_from_env(), 0u);
  setenv("DDP_HOST_CACHE_MB", "512", 1);
  EXPECT_EQ(host_cache_limit_from_env(), 512 * kMiB);
  for (const char* bad : {"-1", "lots", "12x", "99999999999999999999"}) {
    setenv("DDP_HOST_CACHE_MB", bad, 1);
    try {
      host_cache_limit_from_env();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("DDP_HOST_CACHE_MB"), std::string::npos) << e.what();
    }
  }
  unsetenv("DDP_HOST_CACHE_MB");
}

#if defined(__SANITIZE_ADDRESS__)
TEST(HostCacheDeathTest, AUseOfACachedBlockIsReportedByASan) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // torch has started threads
  HostCacheUse use(64 * kMiB);
  auto t = floats(2 * kMiB);
  volatile float* stale = t.data_ptr<float>();
  t.reset();  // cached, poisoned
  EXPECT_DEATH(stale[100] = 1.0f, "use-after-poison");
}
#endif
