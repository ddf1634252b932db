// Lightning's seed_everything and the Trainer's deterministic flag, for the
// random numbers LibTorch draws (dropout, randn, randperm, initialisation):
// the same seed gives the same draws as torch.manual_seed in Python, on the
// same wheel.
#pragma once

#include <cstdint>
#include <optional>

#include <ATen/core/Tensor.h>

#include <string>

namespace ddp::core {

// Lightning's seed_everything(seed): with no seed, PL_GLOBAL_SEED's value,
// else 0. Status::InvalidArgument for a seed outside numpy's
// [0, 2^32 - 1] (Lightning's bounds) or a PL_GLOBAL_SEED that is not an
// integer. Seeds torch's CPU generator and every CUDA device's, and sets
// PL_GLOBAL_SEED (so a process started afterwards, e.g. a local rank the
// strategy launches, seeds itself the same) and PL_SEED_WORKERS. Returns the
// seed used.
int64_t seed_everything(std::optional<int64_t> seed, bool workers);

// Lightning's reset_seed(): seed_everything(PL_GLOBAL_SEED) when it is set,
// nothing otherwise. Returns whether it seeded.
bool reset_seed();

// torch.use_deterministic_algorithms(on, warn_only) as Lightning's
// deterministic=True sets it: cuDNN deterministic and not benchmarking, and
// CUBLAS_WORKSPACE_CONFIG=:4096:8 unless the caller set it.
void set_deterministic(bool on, bool warn_only);
bool deterministic();

// torch.get_rng_state() / torch.set_rng_state(): the CPU generator's state
// as a byte tensor, and setting it back (Status::InvalidArgument naming what
// is wrong with a state that is not one).
at::Tensor cpu_rng_state();
void set_cpu_rng_state(const at::Tensor& state);
// Why torch's CPU generator would refuse `state` (its size, an mt19937
// state that is not one), found on a scratch generator; empty where it
// would take it. The default generator is left alone.
std::string cpu_rng_state_refusal(const at::Tensor& state);

}  // namespace ddp::core
