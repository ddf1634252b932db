// The seeds PyTorch's PowerSGD draws for its random Q matrices come from
// numpy.random.RandomState(random_seed).randint(1_000_000_000). To start
// from the very same Q as PyTorch, this reproduces that stream: MT19937
// seeded as numpy's legacy seeding does (init_genrand for an integer seed),
// and numpy's masked rejection sampling for a bounded integer.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp::core {

class LegacySeedStream {
 public:
  explicit LegacySeedStream(uint32_t seed);
  // numpy's RandomState.randint(high) for 0 < high <= 2^32: uniform in [0, high).
  uint32_t randint(uint64_t high);

  // The generator's state (624 words and the position), for checkpoints.
  std::vector<int64_t> state() const;
  // Status::IO unless `s` is a state() of 625 entries with a position in range.
  void set_state(const std::vector<int64_t>& s);

 private:
  uint32_t next32();
  uint32_t state_[624];
  int pos_;
};

}  // namespace ddp::core