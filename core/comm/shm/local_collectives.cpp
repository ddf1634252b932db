#include "comm/shm/local_collectives.h"

#include <algorithm>
#include <cstring>

#include "comm/shm/ring_order.h"
#include "common/copy_kernel.h"

namespace ddp::core::shm {
namespace {
// Up to this size every rank combines the whole tensor itself (one
// barrier); above it each combines its ring chunk's part (two barriers).
constexpr size_t kWholeBytes = size_t{32} << 10;
}  // namespace

LocalCollectives::LocalCollectives(std::unique_ptr<Segment> segment) : seg_(std::move(segment)) {}

std::string LocalCollectives::describe(const Segment::Call& c) {
  static const char* kinds[] = {"?", "all_reduce", "reduce", "broadcast", "all_gather", "barrier"};
  static const char* ops[] = {"sum", "product", "min", "max", "band", "bor", "bxor"};
  uint32_t kind = c.what & 0xff, op = (c.what >> 8) & 0xff, root = c.what >> 16;
  std::string s = kinds[kind <= 5 ? kind : 0];
  if (op > 0 && op <= 7) s += std::string("(") + ops[op - 1] + ")";
  if (root > 0) s += " root " + std::to_string(root - 1);
  if (c.dtype >= 0)
    s += std::string(" ") + c10::toString(static_cast<c10::ScalarType>(c.dtype)) + " x" + std::to_string(c.count);
  return s;
}

void LocalCollectives::announce(CallKind kind, int reduce_op, const at::Tensor* t, int root) {
  Segment::Call c;
  c.what = kind | (static_cast<uint32_t>(reduce_op + 1) << 8) | (static_cast<uint32_t>(root + 1) << 16);
  if (t) {
    c.dtype = static_cast<int32_t>(t->scalar_type());
    c.count = t->numel();
  }
  seg_->announce(c, &LocalCollectives::describe);
}

void LocalCollectives::reduce(const at::Tensor& t, ReduceKind kind, int root, Clock::time_point deadline,
                              const char* op) {
  const size_t n = static_cast<size_t>(seg_->size());
  const int me = seg_->rank();
  const size_t esz = t.element_size(), total = static_cast<size_t>(t.numel());
  const bool keep = root < 0 || root == me;
  announce(root < 0 ? kAllReduce : kReduce, static_cast<int>(kind), &t, root);
  if (total * esz <= kWholeBytes) return reduce_whole(t, kind, keep, deadline, op);

  if (n == 1) return seg_->barrier(deadline, op);  // the tensor is the result

  // Piece q holds every chunk's q-th part of `part` elements. Chunk c's
  // part is combined in the slot of rank c-1, whose value the ring order
  // starts from; the others read the result from there. A rank copies into
  // its slot only the chunks others combine: its own chunk is combined
  // straight from its tensor (n-1 copies of a chunk per piece, not n+1).
  const size_t chunk = ring_chunk_elements(total, esz, n);
  const size_t part = seg_->slot_bytes() / esz / n;
  const size_t mine = (static_cast<size_t>(me) + 1) % n;
  auto* data = static_cast<uint8_t*>(t.data_ptr());
  auto slot = [&](size_t r, int h) { return seg_->slot(static_cast<int>(r), h); };
  for (size_t q = 0; q * part < chunk; ++q) {
    const int h = next_half();
    auto span = [&](size_t c) {  // chunk c's part of this piece: [first, first + len)
      size_t first = std::min(total, c * chunk + q * part);
      size_t last = std::min({total, (c + 1) * chunk, c * chunk + (q + 1) * part});
      return std::make_pair(first, last > first ? last - first : 0);
    };
    for (size_t c = 0; c < n; ++c) {
      if (c == mine) continue;
      auto [first, len] = span(c);
      copy_bytes(slot(me, h) + c * part * esz, data + first * esz, len * esz);
    }
    seg_->barrier(deadline, op);
    auto [own_first, len] = span(mine);
    uint8_t* own = data + own_first * esz;
    uint8_t* acc = slot(me, h) + mine * part * esz;
    auto peer = [&](size_t step) { return slot(ring_rank_at_step(mine, step, n), h) + mine * part * esz; };
    combine(t.scalar_type(), kind, acc, own, peer(1), len);
    for (size_t step = 2; step < n; ++step) accumulate(t.scalar_type(), kind, acc, peer(step), len);
    if (keep) copy_bytes(own, acc, len * esz);
    seg_->barrier(deadline, op);
    if (!keep) continue;
    for (size_t c = 0; c < n; ++c) {
      if (c == mine) continue;
      auto [first, clen] = span(c);
      copy_bytes(data + first * esz, slot(ring_rank_at_step(c, 0, n), h) + c * part * esz, clen * esz);
    }
  }
}

// One piece, one barrier: every rank combines all of it itself, chunk by
// chunk in ring order.
void LocalCollectives::reduce_whole(const at::Tensor& t, ReduceKind kind, bool keep, Clock::time_point deadline,
                                    const char* op) {
  const size_t n = static_cast<size_t>(seg_->size());
  const size_t esz = t.element_size(), total = static_cast<size_t>(t.numel());
  const size_t chunk = ring_chunk_elements(total, esz, n);
  auto* data = static_cast<uint8_t*>(t.data_ptr());
  const int h = next_half();
  auto from = [&](size_t r) { return seg_->slot_for(static_cast<int>(r), h, total * esz); };
  copy_bytes(from(seg_->rank()), data, total * esz);
  seg_->barrier(deadline, op);
  if (!keep) return;
  for (size_t a = 0; a < total;) {
    const size_t c = a / chunk, b = std::min(total, (c + 1) * chunk);
    copy_bytes(data + a * esz, from(ring_rank_at_step(c, 0, n)) + a * esz, (b - a) * esz);
    for (size_t step = 1; step < n; ++step)
      accumulate(t.scalar_type(), kind, data + a * esz, from(ring_rank_at_step(c, step, n)) + a * esz, b - a);
    a = b;
  }
}

void LocalCollectives::broadcast(const at::Tensor& t, int root, Clock::time_point deadline, const char* op) {
  const int me = seg_->rank();
  announce(kBroadcast, -1, &t, root);
  const size_t bytes = t.nbytes();
  auto* data = static_cast<uint8_t*>(t.data_ptr());
  size_t off = 0;
  do {  // a tensor of no bytes still makes the barrier its peers make
    const size_t len = std::min(seg_->slot_bytes(), bytes - off);
    const int h = next_half();
    if (me == root) copy_bytes(seg_->slot_for(root, h, len), data + off, len);
    seg_->barrier(deadline, op);
    if (me != root) copy_bytes(data + off, seg_->slot_for(root, h, len), len);
    off += len;
  } while (off < bytes);
}

void LocalCollectives::all_gather(const at::Tensor& in, const std::vector<uint8_t*>& dst,
                                  Clock::time_point deadline) {
  const int n = seg_->size(), me = seg_->rank();
  announce(kAllGather, -1, &in, -1);
  const size_t bytes = in.nbytes();
  auto* src = static_cast<const uint8_t*>(in.data_ptr());
  size_t off = 0;
  do {
    const size_t len = std::min(seg_->slot_bytes(), bytes - off);
    const int h = next_half();
    copy_bytes(seg_->slot_for(me, h, len), src + off, len);
    seg_->barrier(deadline, "all_gather");
    for (int r = 0; r < n; ++r) copy_bytes(dst[r] + off, seg_->slot_for(r, h, len), len);
    off += len;
  } while (off < bytes);
}

void LocalCollectives::barrier(Clock::time_point deadline) {
  announce(kBarrier, -1, nullptr, -1);
  seg_->barrier(deadline, "barrier");
}

}  // namespace ddp::core::shm
