#include "comm/shm/local_collectives.h"

#include <algorithm>
#include <cstring>

#include "comm/shm/ring_order.h"
#include "common/copy_kernel.h"
#include "common/error.h"

namespace ddp::core::shm {
namespace {
// Up to this size every rank combines the whole tensor itself (one
// barrier); above it each combines its ring chunk's part (two barriers).
// Where the ranks spin (no more of them than cores), the second barrier
// costs less than reading every peer's whole tensor from 4 KiB on (2 ranks
// on an AMD EPYC (Zen 5) VM: 16 KiB in 1.13 us against 1.30, 8 KiB 0.73
// against 0.88); where they outnumber the cores, a barrier may wait for
// the scheduler, and one barrier up to 32 KiB stays cheaper.
constexpr size_t kWholeBytesSpinning = size_t{4} << 10;
constexpr size_t kWholeBytesSleeping = size_t{32} << 10;
// A shared bucket's chunk is combined and copied to the peers in blocks of
// this size, so that the copies read the result from the cache.
constexpr size_t kSharedBlockBytes = size_t{128} << 10;
// Above this size, up to kReadFromRootMaxBytes, a broadcast moves straight
// between the ranks' tensors (Segment::read_from, write_to): one copy,
// where the slot takes two that nothing overlaps. MPICH's UCX reads the
// same way (process_vm_readv). 2 ranks on the AMD EPYC VM, p50 of 3 runs:
// 64 KiB 6.4-6.8 us against 7.4-7.7 through the slot, 256 KiB 20.1-24.1
// against 28.6-31.8 (MPICH 20.7-25.2), with each peer reading all of it.
// With the root writing its share into each peer while they read the rest
// (2 ranks, 5 runs each, in the VM's state where one read took longest):
// 64 KiB 5.1-5.3 us against 6.7-6.9, 256 KiB 11.6-12.3 against 19.9-22.9
// (MPICH 20.8-21.5); where reads were fast, 256 KiB took 10.6-11.7 either
// way.
constexpr size_t kReadFromRootBytes = size_t{32} << 10;
// Beyond this the slots, whose pieces overlap the root's copy of one with
// the peers' of the one before, are faster. 2 ranks, p50 of 3 runs each,
// copied against through the slots: 1 MiB 40.9-41.1 us against 42.6-153
// (the slots' speed changes with the VM's state), 4 MiB 158-159 against
// 162-213, 8 MiB 329-343 against 332-386, 16 MiB 790-905 against 685-736.
constexpr size_t kReadFromRootMaxBytes = size_t{4} << 20;
// Above this size a broadcast's root streams its post past the caches. A
// cached write must first take back the lines of that entry its peers read
// 24 posts before, which costs the most where their cores are far apart;
// a streamed one does not, but its peers then read it from memory. On the
// AMD EPYC VM, 2 ranks, root's p50 in us, cached against streamed, with
// the cores close (a cached 16 MiB all-reduce in 1.4-1.7 ms) / apart (7-8
// ms): 1 KiB 0.20/0.30 and 0.55/0.31-0.42; 2 KiB 0.29/0.33 and 0.90/0.43;
// 3 KiB 0.39/0.39 and 1.28/0.47; 4 KiB 0.59/0.40 and 2.1/0.42 (MPICH 1.8
// with the cores apart). 4 ranks, 4 KiB: 0.57/0.45 close, 2.1/0.54 apart.
constexpr size_t kStreamedPostsAbove = size_t{2} << 10;

// A copy that peers read next, made `how` (write_mode.h).
void copy_as(WriteMode how, void* dst, const void* src, size_t bytes) {
  if (how == WriteMode::Streaming) copy_bytes_streaming(dst, src, bytes);
  else copy_bytes(dst, src, bytes);
}

// dst <- src * scale, for the float and double elements Elements scales.
void copy_scaled_as(c10::ScalarType type, uint8_t* dst, const uint8_t* src, size_t n, double scale) {
  if (type == c10::kFloat)
    copy_scaled(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), n, static_cast<float>(scale));
  else
    copy_scaled(reinterpret_cast<double*>(dst), reinterpret_cast<const double*>(src), n, scale);
}
}  // namespace

Elements::Elements(const at::Tensor& t)
    : type_(t.scalar_type()),
      esz_(t.element_size()),
      total_(static_cast<size_t>(t.numel())),
      one_{static_cast<uint8_t*>(t.data_ptr()), static_cast<size_t>(t.numel())} {}

Elements::Elements(c10::ScalarType type, const std::vector<Run>& runs, double scale)
    : type_(type), esz_(c10::elementSize(type)), runs_(&runs), scale_(scale) {
  check_arg(scale == 1 || type == c10::kFloat || type == c10::kDouble,
            "shm: only float and double elements are scaled, not " + std::string(c10::toString(type)));
  starts_.reserve(runs.size());
  for (const Run& r : runs) {
    starts_.push_back(total_);
    total_ += r.count;
  }
  if (runs.empty()) runs_ = nullptr;  // no elements: one empty run
}

uint8_t* Elements::single_run() const {
  if (!runs_) return one_.data;
  return runs_->size() == 1 ? (*runs_)[0].data : nullptr;
}

void Elements::read(uint8_t* dst, size_t first, size_t len, WriteMode how) const {
  if (scale_ == 1) return copy_out(dst, first, len, how);
  each(first, len, [&](uint8_t* p, size_t before, size_t n) { copy_scaled_as(type_, dst + before * esz_, p, n, scale_); });
}

void Elements::copy_out(uint8_t* dst, size_t first, size_t len, WriteMode how) const {
  each(first, len, [&](uint8_t* p, size_t before, size_t n) { copy_as(how, dst + before * esz_, p, n * esz_); });
}

void Elements::scale_in_place() const {
  if (scale_ == 1) return;
  each(0, total_, [&](uint8_t* p, size_t, size_t n) { copy_scaled_as(type_, p, p, n, scale_); });
}

void Elements::write(size_t first, size_t len, const uint8_t* src) const {
  each(first, len, [&](uint8_t* p, size_t before, size_t n) { copy_bytes(p, src + before * esz_, n * esz_); });
}

void Elements::combine_with(ReduceKind kind, uint8_t* acc, size_t first, size_t len, const uint8_t* b) const {
  each(first, len, [&](uint8_t* p, size_t before, size_t n) {
    // A scaled value is combined in the same pass that scales it.
    if (scale_ == 1) combine(type_, kind, acc + before * esz_, p, b + before * esz_, n);
    else combine_scaled(type_, kind, acc + before * esz_, p, scale_, b + before * esz_, n);
  });
}

void Elements::combine_in_place(ReduceKind kind, size_t first, size_t len, const uint8_t* b) const {
  each(first, len, [&](uint8_t* p, size_t before, size_t n) {
    if (scale_ == 1) combine(type_, kind, p, p, b + before * esz_, n);
    else combine_scaled(type_, kind, p, p, scale_, b + before * esz_, n);
  });
}

void Elements::accumulate_in_place(ReduceKind kind, size_t first, size_t len, const uint8_t* b) const {
  each(first, len, [&](uint8_t* p, size_t before, size_t n) { accumulate(type_, kind, p, b + before * esz_, n); });
}

LocalCollectives::LocalCollectives(std::unique_ptr<Segment> segment, size_t post_bytes,
                                   std::optional<WriteMode> writes)
    : seg_(std::move(segment)),
      writes_(writes),
      whole_bytes_(seg_->crowded() ? kWholeBytesSleeping : kWholeBytesSpinning),
      post_bytes_(std::min({post_bytes, Segment::kPostBytes, seg_->slot_bytes()})) {}

std::string LocalCollectives::describe(const Segment::Call& c) {
  static const char* kinds[] = {"?", "all_reduce", "reduce", "broadcast", "all_gather", "barrier", "all_reduce"};
  static const char* ops[] = {"sum", "product", "min", "max", "band", "bor", "bxor"};
  uint32_t kind = c.what & 0xff, op = (c.what >> 8) & 0xff, root = c.what >> 16;
  std::string s = kinds[kind <= 6 ? kind : 0];
  if (op > 0 && op <= 7) s += std::string("(") + ops[op - 1] + ")";
  if (kind == kAllReduceShared) s += " of shared bucket " + std::to_string(root - 1);
  else if (root > 0) s += " root " + std::to_string(root - 1);
  if (c.dtype >= 0)
    s += std::string(" ") + c10::toString(static_cast<c10::ScalarType>(c.dtype)) + " x" + std::to_string(c.count);
  return s;
}

void LocalCollectives::announce(CallKind kind, int reduce_op, const at::Tensor* t, int root,
                                const Deadline& deadline, const char* op) {
  if (t) return announce(kind, reduce_op, t->scalar_type(), static_cast<size_t>(t->numel()), root, deadline, op);
  Segment::Call c;
  c.what = what(kind, reduce_op, root);
  announce(c, deadline, op);
}

uint32_t LocalCollectives::what(CallKind kind, int reduce_op, int root) {
  return kind | (static_cast<uint32_t>(reduce_op + 1) << 8) | (static_cast<uint32_t>(root + 1) << 16);
}

Segment::Call LocalCollectives::call(CallKind kind, int reduce_op, c10::ScalarType type, size_t count, int root) {
  Segment::Call c;
  c.what = what(kind, reduce_op, root);
  c.dtype = static_cast<int32_t>(type);
  c.count = static_cast<int64_t>(count);
  return c;
}

void LocalCollectives::announce(CallKind kind, int reduce_op, c10::ScalarType type, size_t count, int root,
                                const Deadline& deadline, const char* op) {
  announce(call(kind, reduce_op, type, count, root), deadline, op);
}

void LocalCollectives::announce(const Segment::Call& c, const Deadline& deadline, const char* op) {
  try {
    seg_->announce(c, &LocalCollectives::describe, deadline, op);
  } catch (const CallMismatch&) {
    next_half();
    throw;
  }
}

void LocalCollectives::reduce(const Elements& x, ReduceKind kind, int root, const Deadline& deadline,
                              const char* op) {
  const size_t n = static_cast<size_t>(seg_->size());
  const int me = seg_->rank();
  const size_t esz = x.elem_size(), total = x.total();
  const bool keep = root < 0 || root == me;
  if (root < 0 && n > 1)
    if (const uint8_t* p = x.single_run())
      if (auto shared = shared_holding(p, total * esz)) {
        announce(kAllReduceShared, static_cast<int>(kind), x.type(), total, shared->second.id, deadline, op);
        return reduce_shared(*shared->first, static_cast<size_t>(p - shared->second.begin), x, kind, deadline, op);
      }
  announce(root < 0 ? kAllReduce : kReduce, static_cast<int>(kind), x.type(), total, root, deadline, op);
  if (total * esz <= whole_bytes_) return reduce_whole(x, kind, keep, deadline, op);

  if (n == 1) {  // the elements are the result, once scaled
    x.scale_in_place();
    return seg_->barrier(deadline, op);
  }

  // Piece q holds every chunk's q-th part of `part` elements. Chunk c's
  // part is combined in the slot of rank c-1, whose value the ring order
  // starts from; the others read the result from there. A rank copies into
  // its slot only the chunks others combine: its own chunk is combined
  // straight from its elements (n-1 copies of a chunk per piece, not n+1).
  const size_t chunk = ring_chunk_elements(total, esz, n);
  const size_t part = seg_->slot_bytes() / esz / n;
  const size_t mine = (static_cast<size_t>(me) + 1) % n;
  auto slot = [&](size_t r, int h) { return seg_->slot(static_cast<int>(r), h); };
  Tuning tune = tuning(Tuned::SlotReduce, total * esz);
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
      x.read(slot(me, h) + c * part * esz, first, len, tune.how);
    }
    if (q == 0) first_barrier(tune, deadline, op);
    else seg_->barrier(deadline, op);
    auto [own_first, len] = span(mine);
    uint8_t* acc = slot(me, h) + mine * part * esz;
    auto peer = [&](size_t step) { return slot(ring_rank_at_step(mine, step, n), h) + mine * part * esz; };
    if (keep && tune.how == WriteMode::Streaming) {
      // Combined in the elements, then streamed to acc for the peers.
      x.combine_in_place(kind, own_first, len, peer(1));
      for (size_t step = 2; step < n; ++step) x.accumulate_in_place(kind, own_first, len, peer(step));
      x.copy_out(acc, own_first, len, tune.how);
    } else {
      x.combine_with(kind, acc, own_first, len, peer(1));
      for (size_t step = 2; step < n; ++step) accumulate(x.type(), kind, acc, peer(step), len);
      // Writing the result to acc and the elements in the combine's own
      // pass reads acc once fewer, but ran slower on the Zen 5 VM (256 KiB
      // on 2 ranks: 13.3 us against 11.1; 17 against 12 at 64 KiB in its
      // slow minutes): two store streams where one copy back stays in cache.
      if (keep) x.write(own_first, len, acc);
    }
    seg_->barrier(deadline, op);
    if (!keep) continue;
    for (size_t c = 0; c < n; ++c) {
      if (c == mine) continue;
      auto [first, clen] = span(c);
      x.write(first, clen, slot(ring_rank_at_step(c, 0, n), h) + c * part * esz);
    }
  }
  tuned_call_done(tune, total * esz);
}

LocalCollectives::Tuning LocalCollectives::tuning(Tuned kind, size_t bytes) const {
  Tuning t;
  t.number = tuned_calls_;
  t.cls = write_class(kind, bytes);
  // Below kTunedBytes a call stays cached and untimed: its bytes stay in
  // the caches anyway, and the clock reads and the advice line moving
  // between the cores cost it more than a way could save (2 ranks, 4-64 B
  // all-gather: 0.4 us against MPICH's 0.3 when every call was timed).
  t.tuned = bytes >= kTunedBytes;
  t.how = writes_                ? *writes_
          : t.tuned             ? mode_in(static_cast<WriteMask>(seg_->advice(t.number)), t.cls)
                                : WriteMode::Cached;
  t.timed = t.tuned && seg_->rank() == 0 && !writes_;
  if (t.timed) t.began = Clock::now();
  return t;
}

void LocalCollectives::first_barrier(Tuning& t, const Deadline& deadline, const char* op) {
  if (t.timed) t.own = Clock::now() - t.began;
  seg_->barrier(deadline, op);
  if (t.tuned) ++tuned_calls_;
  if (t.timed) t.arrived = Clock::now();
}

void LocalCollectives::tuned_call_done(const Tuning& t, size_t bytes) {
  if (!t.timed || bytes == 0) return;
  const Clock::duration took = t.own + (Clock::now() - t.arrived);
  chooser_.record(t.cls, t.how, std::chrono::duration<double, std::nano>(took).count() / static_cast<double>(bytes));
  // Written only when it changes: the peers read this line at every tuned
  // call, and a write would move it between the cores each time.
  const uint64_t mask = chooser_.mask();
  if (seg_->advice(t.number + 2) != mask) seg_->set_advice(t.number + 2, mask);
}

void LocalCollectives::add_shared(const std::shared_ptr<Segment>& memory, uint16_t id) {
  std::lock_guard<std::mutex> lock(shared_mutex_);
  shared_.push_back({memory, memory->slot(memory->rank(), 0), memory->slot_bytes(), id});
  any_shared_.store(true, std::memory_order_release);
}

std::optional<std::pair<std::shared_ptr<Segment>, LocalCollectives::Shared>> LocalCollectives::shared_holding(
    const uint8_t* p, size_t bytes) {
  if (!any_shared_.load(std::memory_order_acquire)) return std::nullopt;
  std::lock_guard<std::mutex> lock(shared_mutex_);
  shared_.erase(std::remove_if(shared_.begin(), shared_.end(), [](const Shared& s) { return s.memory.expired(); }),
                shared_.end());
  for (const Shared& s : shared_)
    if (p >= s.begin && p + bytes <= s.begin + s.bytes)
      if (auto memory = s.memory.lock()) return std::make_pair(std::move(memory), s);
  return std::nullopt;
}

// Every rank's copy is in place once all have arrived (the first barrier,
// which also compares the calls). Each rank then combines its ring chunk
// from all copies, in the ring order, into its own copy and writes the
// result into the others'; no two ranks write the same bytes, and a rank
// reads another's chunk only before the second barrier, before which no
// rank writes it. The result is every rank's in every copy.
void LocalCollectives::reduce_shared(Segment& memory, size_t offset, const Elements& x, ReduceKind kind,
                                     const Deadline& deadline, const char* op) {
  const size_t n = static_cast<size_t>(seg_->size());
  const int me = seg_->rank();
  const size_t esz = x.elem_size(), total = x.total();
  const double scale = x.scale();
  next_half();  // unused: see next_half()
  // The copies into the peers' copies choose how they write.
  Tuning tune = tuning(Tuned::SharedReduce, total * esz);
  first_barrier(tune, deadline, op);
  const size_t chunk = ring_chunk_elements(total, esz, n);
  const size_t mine = (static_cast<size_t>(me) + 1) % n;  // its ring order starts from this rank's value
  const size_t first = std::min(total, mine * chunk), last = std::min(total, first + chunk);
  const size_t block = std::max<size_t>(1, kSharedBlockBytes / esz);
  auto copy_of = [&](size_t r, size_t at) { return memory.slot(static_cast<int>(r), 0) + offset + at * esz; };
  for (size_t a = first; a < last; a += block) {
    const size_t len = std::min(block, last - a);
    uint8_t* out = copy_of(static_cast<size_t>(me), a);  // == the ring order's step 0
    auto value = [&](size_t step) { return copy_of(ring_rank_at_step(mine, step, n), a); };
    if (scale == 1) {
      combine(x.type(), kind, out, out, value(1), len);
      for (size_t step = 2; step < n; ++step) accumulate(x.type(), kind, out, value(step), len);
    } else {  // each rank's value scaled as it is read, as into PyTorch's bucket
      combine_both_scaled(x.type(), kind, out, out, value(1), scale, len);
      for (size_t step = 2; step < n; ++step) accumulate_scaled(x.type(), kind, out, value(step), scale, len);
    }
    for (size_t r = 0; r < n; ++r)
      if (r != static_cast<size_t>(me)) copy_as(tune.how, copy_of(r, a), out, len * esz);
  }
  seg_->barrier(deadline, op);
  tuned_call_done(tune, total * esz);
}

// One piece, one barrier: every rank combines all of it itself, chunk by
// chunk in ring order.
void LocalCollectives::reduce_whole(const Elements& x, ReduceKind kind, bool keep, const Deadline& deadline,
                                    const char* op) {
  const size_t n = static_cast<size_t>(seg_->size());
  const size_t esz = x.elem_size(), total = x.total();
  const size_t chunk = ring_chunk_elements(total, esz, n);
  const int h = next_half();
  auto from = [&](size_t r) { return seg_->slot_for(static_cast<int>(r), h, total * esz); };
  x.read(from(seg_->rank()), 0, total);
  seg_->barrier(deadline, op);
  if (!keep) return;
  for (size_t a = 0; a < total;) {
    const size_t c = a / chunk, b = std::min(total, (c + 1) * chunk);
    x.each(a, b - a, [&](uint8_t* out, size_t before, size_t len) {
      const size_t at = (a + before) * esz;
      auto value = [&](size_t step) { return from(ring_rank_at_step(c, step, n)) + at; };
      if (n == 1) return copy_bytes(out, value(0), len * esz);
      combine(x.type(), kind, out, value(0), value(1), len);  // one pass for the first two
      for (size_t step = 2; step < n; ++step) accumulate(x.type(), kind, out, value(step), len);
    });
    a = b;
  }
}

void LocalCollectives::broadcast(const at::Tensor& t, int root, const Deadline& deadline, const char* op) {
  const int me = seg_->rank();
  const size_t bytes = t.nbytes();
  auto* data = static_cast<uint8_t*>(t.data_ptr());
  const bool one_piece = seg_->size() > 1 && bytes <= std::min(Segment::kPostBytes, seg_->slot_bytes());
  if (one_piece && me == root && post_bytes_ > 0 && bytes <= post_bytes_) {
    // The root posts it into its ring and returns; the peers copy it once
    // they see it. A mismatch reaches the root when it next waits
    // (Segment::post).
    next_half();  // unused: see next_half()
    const WriteMode how = writes_ ? *writes_ : bytes > kStreamedPostsAbove ? WriteMode::Streaming : WriteMode::Cached;
    return seg_->post(call(kBroadcast, -1, t.scalar_type(), static_cast<size_t>(t.numel()), root),
                      &LocalCollectives::describe, data, bytes, how, deadline, op);
  }
  if (one_piece && me != root) {
    // Whether the root posts it is the root's choice (post_bytes_): this
    // rank waits for the root, and for the other ranks only where it did
    // not post.
    const int h = next_half();
    const uint8_t* posted = seg_->await_post(call(kBroadcast, -1, t.scalar_type(), static_cast<size_t>(t.numel()), root),
                                             &LocalCollectives::describe, root, bytes, deadline, op);
    copy_bytes(data, posted ? posted : seg_->slot_for(root, h, bytes), bytes);
    return;
  }
  announce(kBroadcast, -1, &t, root, deadline, op);
  if (seg_->cma() && bytes > kReadFromRootBytes && bytes <= kReadFromRootMaxBytes) {
    // Every rank's tensor address goes through its slot. The root writes
    // the first 1/n of the tensor into each peer while every peer reads
    // the rest from the root, so that n cores copy at once: each rank
    // copies (n - 1)/n of the bytes, where one read by each peer left the
    // root idle. Every rank keeps its tensor as it is until the second
    // barrier, after every copy. A peer whose call fails closes its write
    // window before it returns (Segment::close_for_writes).
    const int h = next_half();
    const uint64_t window = copied_broadcasts_++;
    const uint64_t mine = reinterpret_cast<uintptr_t>(data);
    std::memcpy(seg_->slot(me, h), &mine, sizeof mine);
    if (me != root) seg_->open_for_writes(window);
    try {
      seg_->barrier(deadline, op);
      const size_t pushed = bytes / static_cast<size_t>(seg_->size()) / 64 * 64;  // whole cache lines
      auto address_of = [&](int r) {
        uint64_t at = 0;
        std::memcpy(&at, seg_->slot(r, h), sizeof at);
        return static_cast<uintptr_t>(at);
      };
      if (me == root) {
        // A peer that closed its window has failed, and so has this call:
        // its barrier says so.
        for (int r = 0; r < seg_->size(); ++r)
          if (r != root) seg_->write_to(r, window, address_of(r), data, pushed, op);
      } else {
        seg_->read_from(root, data + pushed, address_of(root) + pushed, bytes - pushed, op);
      }
      seg_->barrier(deadline, op);
    } catch (...) {
      if (me != root) seg_->close_for_writes(window, root);
      throw;
    }
    return;
  }
  Tuning tune = tuning(Tuned::Broadcast, bytes);
  size_t off = 0;
  do {  // a tensor of no bytes still makes the barrier its peers make
    const size_t len = std::min(seg_->slot_bytes(), bytes - off);
    const int h = next_half();
    if (me == root) copy_as(tune.how, seg_->slot_for(root, h, len), data + off, len);
    if (off == 0) first_barrier(tune, deadline, op);
    else seg_->barrier(deadline, op);
    if (me != root) copy_bytes(data + off, seg_->slot_for(root, h, len), len);
    off += len;
  } while (off < bytes);
  tuned_call_done(tune, bytes);
}

void LocalCollectives::all_gather(const at::Tensor& in, const std::vector<uint8_t*>& dst,
                                  const Deadline& deadline) {
  const int n = seg_->size(), me = seg_->rank();
  announce(kAllGather, -1, &in, -1, deadline, "all_gather");
  const size_t bytes = in.nbytes();
  auto* src = static_cast<const uint8_t*>(in.data_ptr());
  Tuning tune = tuning(Tuned::AllGather, bytes * static_cast<size_t>(n));
  size_t off = 0;
  do {
    const size_t len = std::min(seg_->slot_bytes(), bytes - off);
    const int h = next_half();
    if (n > 1) copy_as(tune.how, seg_->slot_for(me, h, len), src + off, len);
    if (off == 0) first_barrier(tune, deadline, "all_gather");
    else seg_->barrier(deadline, "all_gather");
    // This rank's own part comes from its input (one read fewer), unless
    // the input is that part already (an in-place gather).
    for (int r = 0; r < n; ++r) {
      const uint8_t* from = r == me ? src + off : seg_->slot_for(r, h, len);
      if (dst[r] + off != from) copy_bytes(dst[r] + off, from, len);
    }
    off += len;
  } while (off < bytes);
  tuned_call_done(tune, bytes * static_cast<size_t>(n));
}

void LocalCollectives::barrier(const Deadline& deadline) {
  announce(kBarrier, -1, nullptr, -1, deadline, "barrier");
  next_half();  // unused: see next_half()
  seg_->barrier(deadline, "barrier");
}

}  // namespace ddp::core::shm
