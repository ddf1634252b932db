// Seeding and determinism: core/model/seeding.
#include "ddp/seed.h"

#include "fence.h"
#include "model/seeding.h"

using namespace ddp::capi;

extern "C" {

ddp_status ddp_seed_everything(int64_t seed, int workers, int64_t* used) {
  return fence([&] {
    int64_t s = ddp::core::seed_everything(seed < 0 ? std::nullopt : std::optional<int64_t>(seed), workers != 0);
    if (used) *used = s;
  });
}

ddp_status ddp_reset_seed(int* seeded) {
  return fence([&] {
    bool s = ddp::core::reset_seed();
    if (seeded) *seeded = s ? 1 : 0;
  });
}

ddp_status ddp_set_deterministic(int on, int warn_only) {
  return fence([&] { ddp::core::set_deterministic(on != 0, warn_only != 0); });
}

int ddp_is_deterministic(void) { return ddp::core::deterministic() ? 1 : 0; }

}  // extern "C"
