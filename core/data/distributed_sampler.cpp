#include "data/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/randperm.h>

#include <algorithm>
#include <string>

#include "common/error.h"

namespace ddp::core {
namespace {

void check_shape(int64_t dataset_size, int num_replicas) {
  check_arg(dataset_size >= 0, "sampler: dataset size " + std::to_string(dataset_size) + " is negative");
  check_arg(num_replicas >= 1, "sampler: num_replicas " + std::to_string(num_replicas) + " must be at least 1");
}

// torch.Generator.manual_seed takes a negative seed as its two's complement
// bits (what its code does; its docstring's formula is one less).
uint64_t generator_seed(int64_t seed) { return static_cast<uint64_t>(seed); }

}  // namespace

int64_t sampler_num_samples(int64_t dataset_size, int num_replicas, bool drop_last) {
  check_shape(dataset_size, num_replicas);
  if (drop_last && dataset_size % num_replicas != 0)
    return (dataset_size - num_replicas + num_replicas - 1) / num_replicas;  // ceil((n - R) / R), n > R here or 0
  return (dataset_size + num_replicas - 1) / num_replicas;
}

int64_t unrepeated_num_samples(int64_t dataset_size, int num_replicas, int rank) {
  check_shape(dataset_size, num_replicas);
  return rank >= dataset_size ? 0 : (dataset_size - rank + num_replicas - 1) / num_replicas;  // len(range(rank, n, R))
}

std::vector<int64_t> sampler_indices(int64_t dataset_size, int num_replicas, int rank, int64_t epoch,
                                     const SamplerOptions& opts) {
  check_shape(dataset_size, num_replicas);
  check_arg(rank >= 0 && rank < num_replicas, "sampler: rank " + std::to_string(rank) + " is outside [0, " +
                                                  std::to_string(num_replicas) + ")");
  check_arg(opts.start >= 0, "sampler: start " + std::to_string(opts.start) + " is negative");
  // The entries left after `start`; a start past the (padded) list's end
  // leaves none.
  const int64_t left = std::max<int64_t>(dataset_size - opts.start, 0);
  const int64_t per_rank = opts.unrepeated ? unrepeated_num_samples(left, num_replicas, rank)
                                           : sampler_num_samples(left, num_replicas, opts.drop_last);
  // Unrepeated: the list is the dataset itself, neither padded nor trimmed.
  const int64_t total = opts.unrepeated ? left : per_rank * num_replicas;
  std::vector<int64_t> all(static_cast<size_t>(dataset_size));
  if (opts.shuffle && dataset_size > 0) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>();
    gen.set_current_seed(generator_seed(opts.unrepeated ? epoch : opts.seed + epoch));
    at::Tensor perm = at::randperm(dataset_size, gen, at::TensorOptions().dtype(at::kLong));
    const int64_t* p = perm.data_ptr<int64_t>();
    all.assign(p, p + dataset_size);
  } else {
    for (int64_t i = 0; i < dataset_size; ++i) all[static_cast<size_t>(i)] = i;
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank));
  // The padded (or trimmed) list has `total` entries after the start;
  // entry j is all[(start + j) % n], so the padding wraps to the epoch's
  // first entries as an unresumed epoch's does.
  for (int64_t j = rank; j < total; j += num_replicas)
    mine.push_back(all[static_cast<size_t>((opts.start + j) % dataset_size)]);
  return mine;
}

}  // namespace ddp::core
