// PowerSGD gradient compression (PyTorch's powerSGD_hook and
// batched_powerSGD_hook, torch.distributed.algorithms.ddp_comm_hooks).
#pragma once

#include <cstdint>
#include <memory>

#include "hooks/comm_hook.h"

namespace ddp::core {

// PyTorch's PowerSGDState arguments, with its defaults.
struct PowerSgdOptions {
  int64_t matrix_approximation_rank = 1;
  int64_t start_powersgd_iter = 1000;  // plain all-reduce for the steps before
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  uint32_t random_seed = 0;
  bool batch_tensors_with_same_shape = false;
  bool batched = false;  // batched_powerSGD_hook: the whole bucket as one square matrix
};

// Elements before and after compression, summed over every compressed step
// (PyTorch's PowerSGDState.compression_stats()).
struct CompressionStats {
  uint64_t numel_before = 0;
  uint64_t numel_after = 0;
  int64_t iteration = 0;  // steps seen (PowerSGDState.iter)
};

class PowerSgdHook : public CommHook {
 public:
  virtual CompressionStats stats() const = 0;
};

// Validates the options as PyTorch does (start_powersgd_iter > 1 with error
// feedback or warm start, since those keep per-bucket state).
std::shared_ptr<PowerSgdHook> make_powersgd_hook(const PowerSgdOptions& opts);

}  // namespace ddp::core