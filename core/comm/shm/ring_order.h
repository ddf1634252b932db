// The order in which Gloo's ring all-reduce (gloo/allreduce.cc, the
// algorithm c10d's ProcessGroupGloo uses) combines the ranks' values, so
// that the shm backend reproduces PyTorch's float results bit for bit.
//
// Gloo cuts the tensor into one chunk per rank (each a whole number of its
// segments of at most 1 MiB, at least two segments per rank). Chunk c
// travels the ring from rank c-1 downwards, each rank adding its own value
// to what it received, and ends on rank c:
//   x[c] op (x[c+1] op (... op (x[c-2] op x[c-1])))     (ranks mod n)
// Every op is commutative, so "own op received" equals accumulating into
// the received value.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ddp::core::shm {

// Elements per ring chunk for a tensor of `elements` elements of `elem_size`
// bytes on `ranks` ranks (the last chunks may be short or empty).
inline size_t ring_chunk_elements(size_t elements, size_t elem_size, size_t ranks) {
  constexpr size_t kMaxSegmentBytes = size_t{1} << 20;  // gloo::AllreduceOptions' default
  auto round_up = [](size_t v, size_t m) { return (v + m - 1) / m * m; };
  const size_t total = elements * elem_size;
  const size_t max_segment = elem_size * std::max<size_t>(1, kMaxSegmentBytes / elem_size);
  const size_t segments = round_up(std::max((total + max_segment - 1) / max_segment, ranks * 2), ranks);
  const size_t segment_bytes = round_up((total + segments - 1) / segments, elem_size);
  return std::max<size_t>(1, segments / ranks * segment_bytes / elem_size);
}

// The rank whose value starts chunk c's reduction, then the ones added
// after it: step 0 is c-1, step k is c-1-k (mod n), the last is c.
inline size_t ring_rank_at_step(size_t chunk, size_t step, size_t ranks) {
  return (chunk + 2 * ranks - 1 - step) % ranks;
}

}  // namespace ddp::core::shm
