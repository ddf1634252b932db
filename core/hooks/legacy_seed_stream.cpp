#include "hooks/legacy_seed_stream.h"

#include "common/error.h"

namespace ddp::core {
namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
}  // namespace

LegacySeedStream::LegacySeedStream(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + uint32_t(i);
  pos_ = kN;
}

uint32_t LegacySeedStream::next32() {
  if (pos_ == kN) {  // regenerate the whole block, as the reference MT19937
    for (int i = 0; i < kN; ++i) {
      uint32_t y = (state_[i] & kUpper) | (state_[(i + 1) % kN] & kLower);
      state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? kMatrixA : 0u);
    }
    pos_ = 0;
  }
  uint32_t y = state_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t LegacySeedStream::randint(uint64_t high) {
  uint64_t max = high - 1;  // numpy's "rng": the largest value drawn
  if (max == 0) return 0;
  uint32_t mask = uint32_t(max);  // smallest all-ones mask covering max
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  uint32_t v;
  while ((v = next32() & mask) > max) {
  }
  return v;
}

std::vector<int64_t> LegacySeedStream::state() const {
  std::vector<int64_t> s(state_, state_ + kN);
  s.push_back(pos_);
  return s;
}

void LegacySeedStream::set_state(const std::vector<int64_t>& s) {
  if (s.size() != kN + 1 || s[kN] < 0 || s[kN] > kN) fail(Status::IO, "seed stream state: not an MT19937 state");
  for (int i = 0; i < kN; ++i) {
    if (s[i] < 0 || s[i] > 0xffffffffLL) fail(Status::IO, "seed stream state: a word out of range");
    state_[i] = static_cast<uint32_t>(s[i]);
  }
  pos_ = static_cast<int>(s[kN]);
}

}  // namespace ddp::core
