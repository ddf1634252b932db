// Which gradients share a bucket: PyTorch's compute_bucket_assignment_by_size
// (torch/csrc/distributed/c10d/reducer.cpp), re-derived so that libddp's
// buckets for the same parameters are PyTorch's buckets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddp::core {

struct TensorInfo {
  size_t bytes = 0;
  int dtype = 0;   // any key: tensors of different dtype never share a bucket
  int device = 0;  // likewise for devices
};

struct BucketAssignment {
  std::vector<std::vector<size_t>> buckets;  // tensor indices, in bucket order
  std::vector<size_t> size_limits;           // the limit each bucket was filled against
};

// Walks `order` (tensor indices; empty: 0..n-1), appending each tensor to the
// open bucket of its (dtype, device). A bucket closes once its size reaches
// its limit; the limits are taken from `limits` in turn per (dtype, device),
// the last one repeating. Open buckets close at the end. With an empty
// `order` the buckets are sorted by their smallest index, as PyTorch does.
BucketAssignment compute_bucket_assignment(const std::vector<TensorInfo>& tensors,
                                           const std::vector<size_t>& limits,
                                           const std::vector<size_t>& order = {});

}  // namespace ddp::core