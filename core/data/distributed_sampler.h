// Data sharding exactly as torch.utils.data.DistributedSampler (which
// Lightning injects): each rank gets every num_replicas-th index of one
// permutation (seeded with seed + epoch, so every rank draws the same one),
// padded by wrapping around to a multiple of num_replicas, or trimmed with
// drop_last.
#pragma once

#include <cstdint>
#include <vector>

namespace ddp::core {

struct SamplerOptions {
  bool shuffle = true;
  int64_t seed = 0;
  bool drop_last = false;
  // Lightning's UnrepeatedDistributedSampler (evaluation and prediction):
  // every index exactly once over the ranks, no padding, so the ranks'
  // counts may differ by one; drop_last is ignored. Its shuffle is seeded
  // with the epoch alone (Lightning's code ignores the seed there).
  bool unrepeated = false;
  // Where a resumed epoch starts: entries of the epoch's list (the
  // permutation, read round) already trained on over every rank. The rest
  // of the list, from there, is padded (or trimmed) and sharded afresh
  // among num_replicas, so a job resumed with another world size still
  // sees each remaining sample once; with the world size that trained the
  // first `start` entries (a multiple of it), each rank's indices are the
  // tail of what it would have had.
  int64_t start = 0;
};

// The number of indices each rank gets.
int64_t sampler_num_samples(int64_t dataset_size, int num_replicas, bool drop_last);
// The number rank `rank` gets from the unrepeated sampler.
int64_t unrepeated_num_samples(int64_t dataset_size, int num_replicas, int rank);

// How many indices sampler_indices gives rank `rank`, without listing them.
int64_t sampler_count(int64_t dataset_size, int num_replicas, int rank, const SamplerOptions& opts);

// Rank `rank`'s indices for `epoch`, in order.
std::vector<int64_t> sampler_indices(int64_t dataset_size, int num_replicas, int rank, int64_t epoch,
                                     const SamplerOptions& opts);

}  // namespace ddp::core
