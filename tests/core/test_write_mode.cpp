// How the shm collectives choose between cached and streaming writes
// (comm/shm/write_mode.h): local rank 0's chooser, driven here call by call
// the way LocalCollectives drives it (each call made as the word of its
// parity says, recorded, the mask published for the call two later), on
// machines whose speeds the test sets.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>

#include "comm/shm/write_mode.h"

namespace {
using ddp::core::shm::mode_in;
using ddp::core::shm::Tuned;
using ddp::core::shm::write_class;
using ddp::core::shm::WriteMask;
using ddp::core::shm::WriteMode;
using ddp::core::shm::WriteModeChooser;

constexpr int kClass = 5;  // 4 to 16 MiB

// Runs calls of kClass, numbered on from the last; `cost(k, mode)` is what
// call k takes; `used` keeps how each call was made.
struct Driver {
  WriteModeChooser chooser;
  uint64_t advice[2] = {0, 0};  // the segment's words, by the call's parity
  uint64_t next_call = 0;
  std::vector<WriteMode> used;
  void run(int calls, const std::function<double(uint64_t, WriteMode)>& cost) {
    for (int i = 0; i < calls; ++i, ++next_call) {
      const uint64_t k = next_call;
      const WriteMode how = mode_in(static_cast<WriteMask>(advice[k % 2]), kClass);
      used.push_back(how);
      chooser.record(kClass, how, cost(k, how));
      advice[(k + 2) % 2] = chooser.mask();
    }
  }
  int count(WriteMode m, size_t from, size_t to) const {
    int c = 0;
    for (size_t i = from; i < to && i < used.size(); ++i) c += used[i] == m;
    return c;
  }
};

TEST(WriteMode, SizeClassesArePowersOfFourFrom16KiBForEachKind) {
  const Tuned r = Tuned::SlotReduce;
  EXPECT_EQ(write_class(r, 0), 0);
  EXPECT_EQ(write_class(r, (16 << 10) - 1), 0);
  EXPECT_EQ(write_class(r, 16 << 10), 1);
  EXPECT_EQ(write_class(r, (64 << 10) - 1), 1);
  EXPECT_EQ(write_class(r, 64 << 10), 2);
  EXPECT_EQ(write_class(r, 16 << 20), 6);
  EXPECT_EQ(write_class(r, 64 << 20), 7);
  EXPECT_EQ(write_class(r, size_t{1} << 40), 7);
  EXPECT_EQ(write_class(Tuned::SharedReduce, 16 << 20), 14);
  EXPECT_EQ(write_class(Tuned::Broadcast, 0), 16);
  EXPECT_EQ(write_class(Tuned::AllGather, size_t{1} << 40), 31);
}

// Each class's bit is its own: a choice for one class leaves the others'.
TEST(WriteMode, ClassesChooseApart) {
  WriteModeChooser c;
  for (int i = 0; i < 50; ++i) {
    const WriteMode a = mode_in(c.mask(), 3), b = mode_in(c.mask(), 20);
    c.record(3, a, a == WriteMode::Streaming ? 1.0 : 3.0);
    c.record(20, b, b == WriteMode::Cached ? 1.0 : 3.0);
  }
  EXPECT_EQ(mode_in(c.mask(), 3), WriteMode::Streaming);
  EXPECT_EQ(mode_in(c.mask(), 20), WriteMode::Cached);
  EXPECT_EQ(c.mask() & ~((WriteMask{1} << 3) | (WriteMask{1} << 20)), 0u);
}

// Streaming twice as fast: after both were tried, nearly every call streams;
// the cached mode is tried again only every kRetryEvery calls or so.
TEST(WriteMode, SettlesOnTheFasterModeAndRetriesTheOtherRarely) {
  for (WriteMode fast : {WriteMode::Streaming, WriteMode::Cached}) {
    Driver d;
    d.run(1000, [&](uint64_t, WriteMode m) { return m == fast ? 1.0 : 2.0; });
    const WriteMode slow = fast == WriteMode::Streaming ? WriteMode::Cached : WriteMode::Streaming;
    EXPECT_LE(d.count(slow, 10, 1000), 1000 / static_cast<int>(WriteModeChooser::kRetryEvery) + 2)
        << "fast=" << static_cast<int>(fast);
    EXPECT_EQ(d.used[20], fast);
  }
}

// The machine changes (cores moved apart: cached 5x slower) and back: the
// chooser follows each change within a few calls, through the change in
// the speed of the mode it uses.
TEST(WriteMode, FollowsTheMachineWhenItChanges) {
  Driver d;
  auto phase = [](uint64_t k) { return (k / 300) % 2; };  // 0: cores close, 1: apart
  d.run(1200, [&](uint64_t k, WriteMode m) {
    if (phase(k) == 0) return m == WriteMode::Cached ? 1.5 : 2.7;
    return m == WriteMode::Cached ? 7.5 : 1.8;
  });
  for (size_t start : {300u, 600u, 900u}) {
    const WriteMode fast = phase(start) == 0 ? WriteMode::Cached : WriteMode::Streaming;
    const WriteMode slow = fast == WriteMode::Cached ? WriteMode::Streaming : WriteMode::Cached;
    // Two calls to notice, a try published for two calls later, and the
    // choice after it published for two calls later again.
    EXPECT_EQ(d.used[start + 6], fast) << "from call " << start;
    EXPECT_LE(d.count(slow, start + 6, start + 300), static_cast<int>(300 / WriteModeChooser::kRetryEvery) + 1)
        << "from call " << start;
  }
}

// Noise of +-20% on a host where the modes differ by 2x: the slower mode
// runs in the periodic tries and hardly more (2000 / kRetryEvery = 15).
TEST(WriteMode, NoiseDoesNotMakeItFlip) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.8, 1.2);
  Driver d;
  d.run(2000, [&](uint64_t, WriteMode m) { return (m == WriteMode::Streaming ? 1.0 : 2.0) * noise(rng); });
  EXPECT_LE(d.count(WriteMode::Cached, 10, 2000), 2000 / 50);
}

// The first calls of a class touch fresh pages: their slowness must not
// stay in the chooser's estimate of the mode they were made in.
TEST(WriteMode, SlowFirstCallsDoNotStick) {
  Driver d;
  d.run(200, [&](uint64_t k, WriteMode m) {
    if (k < 2) return 50.0;
    return m == WriteMode::Cached ? 1.0 : 1.6;
  });
  EXPECT_LE(d.count(WriteMode::Streaming, 0, 200), 3);
}

}  // namespace
