#include "data/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>

#include <algorithm>
#include <new>
#include <string>
#include <vector>

#include "common/error.h"

namespace ddp::core {
namespace {

void check_shape(int64_t dataset_size, int num_replicas) {
  check_arg(dataset_size >= 0, "sampler: dataset size " + std::to_string(dataset_size) + " is negative");
  check_arg(num_replicas >= 1, "sampler: num_replicas " + std::to_string(num_replicas) + " must be at least 1");
}

// DistributedSampler seeds with seed + epoch, a Python int, and
// torch.Generator.manual_seed takes it as unsigned 64 bits, or a negative one
// as its two's complement bits (what its code does; its docstring's formula
// is one less); a sum below -2^63 is its ValueError. The two int64s may
// overflow: past 2^63 - 1 the wrapped sum's bits are the unsigned sum.
uint64_t generator_seed(int64_t seed, int64_t epoch) {
  int64_t sum = 0;
  check_arg(!__builtin_add_overflow(seed, epoch, &sum) || seed > 0,
            "sampler: seed " + std::to_string(seed) + " + epoch " + std::to_string(epoch) +
                " is below -2^63, outside what torch.Generator.manual_seed accepts");
  return static_cast<uint64_t>(seed) + static_cast<uint64_t>(epoch);
}

}  // namespace

// The counts are exact for every int64 size: ceil(n / R) written as
// (n + R - 1) / R overflowed near INT64_MAX, where PyTorch's float division
// is no longer exact either (it is from 0 to 2^53).
int64_t sampler_num_samples(int64_t dataset_size, int num_replicas, bool drop_last) {
  check_shape(dataset_size, num_replicas);
  // drop_last with a remainder: ceil((n - R) / R), which is n / R rounded down.
  if (drop_last) return dataset_size / num_replicas;
  return dataset_size / num_replicas + (dataset_size % num_replicas != 0);
}

int64_t unrepeated_num_samples(int64_t dataset_size, int num_replicas, int rank) {
  check_shape(dataset_size, num_replicas);
  return rank >= dataset_size ? 0 : (dataset_size - rank - 1) / num_replicas + 1;  // len(range(rank, n, R))
}

int64_t sampler_count(int64_t dataset_size, int num_replicas, int rank, const SamplerOptions& opts) {
  check_shape(dataset_size, num_replicas);
  check_arg(rank >= 0 && rank < num_replicas, "sampler: rank " + std::to_string(rank) + " is outside [0, " +
                                                  std::to_string(num_replicas) + ")");
  check_arg(opts.start >= 0, "sampler: start " + std::to_string(opts.start) + " is negative");
  // The entries left after `start`; a start past the (padded) list's end
  // leaves none.
  const int64_t left = std::max<int64_t>(dataset_size - opts.start, 0);
  return opts.unrepeated ? unrepeated_num_samples(left, num_replicas, rank)
                         : sampler_num_samples(left, num_replicas, opts.drop_last);
}

std::vector<int64_t> sampler_indices(int64_t dataset_size, int num_replicas, int rank, int64_t epoch,
                                     const SamplerOptions& opts) {
  const int64_t per_rank = sampler_count(dataset_size, num_replicas, rank, opts);
  // DistributedSampler seeds its generator even for an empty dataset.
  const uint64_t seed = opts.shuffle ? generator_seed(opts.unrepeated ? 0 : opts.seed, epoch) : 0;
  // The epoch's list is made whole, as DistributedSampler's randperm makes
  // it: a size that cannot be held is refused before anything is allocated
  // (an allocator under a sanitizer aborts on such a request).
  const int64_t most = static_cast<int64_t>(std::vector<int64_t>().max_size() / 2);
  if (dataset_size > most)
    fail(Status::NoMemory, "sampler: a dataset of " + std::to_string(dataset_size) +
                               " samples is too large to list its indices (8 bytes each)");
  std::vector<int64_t> all;
  try {
    all.resize(static_cast<size_t>(dataset_size));
  } catch (const std::bad_alloc&) {
    fail(Status::NoMemory, "sampler: out of memory listing the indices of " + std::to_string(dataset_size) +
                               " samples (8 bytes each)");
  }
  if (opts.shuffle && dataset_size > 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>();
    gen.set_current_seed(seed);
    at::Tensor perm = at::randperm(dataset_size, gen, at::TensorOptions().dtype(at::kLong));
    const int64_t* p = perm.data_ptr<int64_t>();
    std::copy(p, p + dataset_size, all.begin());
  } else {
    for (int64_t i = 0; i < dataset_size; ++i) all[static_cast<size_t>(i)] = i;
  }
  // The padded (or trimmed) list after the start; entry j is
  // all[(start + j) % n], so the padding wraps to the epoch's first entries
  // as an unresumed epoch's does. Rank r has its entries r, r + R, ...
  std::vector<int64_t> mine(static_cast<size_t>(per_rank));
  for (int64_t k = 0; k < per_rank; ++k)
    mine[static_cast<size_t>(k)] = all[static_cast<size_t>((opts.start + rank + k * num_replicas) % dataset_size)];
  return mine;
}

}  // namespace ddp::core
