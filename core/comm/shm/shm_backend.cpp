// The "shm" c10d backend: collectives between the ranks of one host through
// a shared-memory segment (comm/shm/segment.h), Gloo between hosts, and Gloo
// for whatever this file does not implement itself.
//
// Every collective here runs to completion on the calling thread and
// returns finished work: on one host a bucket's all-reduce takes about as
// long as handing it to a communication thread would. One mutex orders the
// calls of several threads, as Gloo's queue does.
//
// Data moves in pieces of at most the slot size. A piece is copied into the
// rank's own slot; after a barrier every rank reads what it needs from the
// others' slots. Halves alternate from piece to piece, so a rank writing the
// next piece never overwrites one that a slower rank is still reading: it
// has passed a barrier that every rank reaches only after reading.
#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "comm/backend_factory.h"
#include "comm/shm/reduce_kernels.h"
#include "comm/shm/ring_order.h"
#include "comm/shm/segment.h"
#include "common/error.h"

namespace ddp::core {
namespace {

using shm::ReduceKind;

// Per rank and half: large enough that a 25 MiB bucket takes a few dozen
// pieces, small enough that 8 ranks map 64 MiB (touched only as used).
constexpr size_t kSlotBytes = size_t{512} << 10;
// DDP_SHM_SLOT_KIB overrides it (64 KiB to 256 MiB; every rank of a host
// must use the same value), for measuring.
size_t slot_bytes() {
  const char* v = std::getenv("DDP_SHM_SLOT_KIB");
  if (!v || !*v) return kSlotBytes;
  char* end = nullptr;
  long kib = std::strtol(v, &end, 10);
  check_arg(*end == 0 && kib >= 64 && kib <= (256 << 10),
            "DDP_SHM_SLOT_KIB='" + std::string(v) + "' is not a number of KiB from 64 to 262144");
  return static_cast<size_t>(kib) << 10;
}
// Up to this size every rank reduces the whole tensor itself (one barrier);
// above it each reduces its share and reads the others' (two barriers).
constexpr size_t kWholePieceBytes = size_t{32} << 10;

// Work that is finished when it is returned: the result or the failure.
class FinishedWork final : public c10d::Work {
 public:
  FinishedWork(c10d::OpType type, std::vector<at::Tensor> result, std::exception_ptr failure)
      : Work(-1, type), result_(std::move(result)) {
    fut_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    if (failure) fut_->setError(failure);
    else fut_->markCompleted(c10::IValue(result_));
    finish(failure);
  }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return fut_; }

 private:
  std::vector<at::Tensor> result_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
};

std::optional<ReduceKind> reduce_kind(const c10d::ReduceOp& op) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return ReduceKind::Sum;
    case c10d::ReduceOp::PRODUCT: return ReduceKind::Product;
    case c10d::ReduceOp::MIN: return ReduceKind::Min;
    case c10d::ReduceOp::MAX: return ReduceKind::Max;
    case c10d::ReduceOp::BAND: return ReduceKind::BitAnd;
    case c10d::ReduceOp::BOR: return ReduceKind::BitOr;
    case c10d::ReduceOp::BXOR: return ReduceKind::BitXor;
    default: return std::nullopt;
  }
}

bool plain_cpu(const at::Tensor& t) { return t.defined() && t.is_cpu() && t.is_contiguous() && !t.is_sparse(); }

bool single_plain(const std::vector<at::Tensor>& ts) { return ts.size() == 1 && plain_cpu(ts[0]); }

// Where this rank's host and the others' are: ranks grouped by node id.
struct Topology {
  std::vector<int> local_ranks;  // group ranks on this node, ascending
  int local_rank = 0;            // index of this rank in local_ranks
  int node_index = 0;            // nodes numbered by their lowest rank
  int nodes = 1;
};

std::vector<std::string> gather_strings(c10d::Store& store, const std::string& key, int rank, int size,
                                        const std::string& mine, Millis timeout) {
  store.set(key + "/" + std::to_string(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key + "/" + std::to_string(r));
  store.wait(keys, timeout);
  std::vector<std::string> out;
  for (auto& v : store.multiGet(keys)) out.emplace_back(v.begin(), v.end());
  return out;
}

Topology find_topology(c10d::Store& store, const BackendSpec& spec) {
  auto nodes = gather_strings(store, "node", spec.rank, spec.size, spec.node, spec.timeout);
  Topology t;
  std::map<std::string, int> index_of;
  for (int r = 0; r < spec.size; ++r) {
    if (!index_of.count(nodes[r])) index_of.emplace(nodes[r], static_cast<int>(index_of.size()));
    if (nodes[r] == spec.node) {
      if (r == spec.rank) t.local_rank = static_cast<int>(t.local_ranks.size());
      t.local_ranks.push_back(r);
    }
  }
  t.node_index = index_of.at(spec.node);
  t.nodes = static_cast<int>(index_of.size());
  return t;
}

class ShmBackend final : public c10d::Backend {
 public:
  ShmBackend(const BackendSpec& spec, Topology topo, std::unique_ptr<shm::Segment> segment,
             c10::intrusive_ptr<c10d::Backend> leaders)
      : Backend(spec.rank, spec.size),
        spec_(spec),
        topo_(std::move(topo)),
        seg_(std::move(segment)),
        leaders_(std::move(leaders)) {}

  const std::string getBackendName() const override { return "shm"; }

  void setTimeout(std::chrono::milliseconds timeout) override {
    std::lock_guard<std::mutex> lock(mutex_);
    spec_.timeout = timeout;
    if (leaders_) leaders_->setTimeout(timeout);
    if (gloo_) gloo_->setTimeout(timeout);
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts, const c10d::AllreduceOptions& o) override {
    auto kind = reduce_kind(o.reduceOp);
    if (!single_plain(ts) || !kind || !shm::reduce_supported(ts[0].scalar_type(), *kind))
      return gloo_op([&](c10d::Backend& b) { return b.allreduce(ts, o); });
    return run(c10d::OpType::ALLREDUCE, ts, [&](Clock::time_point deadline) {
      at::Tensor t = ts[0];
      reduce_local(t, *kind, -1, deadline, "all_reduce");
      if (topo_.nodes > 1) {
        across_nodes(deadline, "all_reduce", [&]() {
          std::vector<at::Tensor> one{t};
          c10d::AllreduceOptions lo;
          lo.reduceOp = o.reduceOp;
          return leaders_->allreduce(one, lo);
        });
        broadcast_local(t, 0, deadline, "all_reduce");
      }
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& ts, const c10d::ReduceOptions& o) override {
    auto kind = reduce_kind(o.reduceOp);
    if (topo_.nodes > 1 || !single_plain(ts) || !kind || !shm::reduce_supported(ts[0].scalar_type(), *kind))
      return gloo_op([&](c10d::Backend& b) { return b.reduce(ts, o); });
    return run(c10d::OpType::REDUCE, ts, [&](Clock::time_point deadline) {
      reduce_local(ts[0], *kind, static_cast<int>(o.rootRank), deadline, "reduce");
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts, const c10d::BroadcastOptions& o) override {
    if (topo_.nodes > 1 || !single_plain(ts))
      return gloo_op([&](c10d::Backend& b) { return b.broadcast(ts, o); });
    return run(c10d::OpType::BROADCAST, ts, [&](Clock::time_point deadline) {
      broadcast_local(ts[0], static_cast<int>(o.rootRank), deadline, "broadcast");
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions& o) override {
    if (topo_.nodes > 1 || !single_plain(ins) || outs.size() != 1 || !gather_outputs_fit(outs[0], ins[0]))
      return gloo_op([&](c10d::Backend& b) { return b.allgather(outs, ins, o); });
    std::vector<uint8_t*> dst;
    for (auto& t : outs[0]) dst.push_back(static_cast<uint8_t*>(t.data_ptr()));
    return run(c10d::OpType::ALLGATHER, outs[0], [&](Clock::time_point deadline) {
      gather_local(ins[0], dst, deadline);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    std::vector<at::Tensor> ins{in};
    if (topo_.nodes > 1 || !single_plain(ins) || !plain_cpu(out) || out.scalar_type() != in.scalar_type() ||
        out.numel() != in.numel() * getSize())
      return gloo_op([&](c10d::Backend& b) { return b._allgather_base(out, in, o); });
    std::vector<uint8_t*> dst;
    for (int r = 0; r < getSize(); ++r) dst.push_back(static_cast<uint8_t*>(out.data_ptr()) + r * in.nbytes());
    std::vector<at::Tensor> result{out};
    return run(c10d::OpType::_ALLGATHER_BASE, result, [&](Clock::time_point deadline) {
      gather_local(in, dst, deadline);
    });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    if (topo_.nodes > 1) return gloo_op([&](c10d::Backend& b) { return b.barrier(o); });
    return run(c10d::OpType::BARRIER, {}, [&](Clock::time_point deadline) {
      announce(kBarrier, -1, nullptr, -1);
      seg_->barrier(deadline, "barrier");
    });
  }

  // Not done on shared memory: Gloo does them, over the same ranks.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& ts,
                                                     const c10d::AllreduceCoalescedOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.allreduce_coalesced(ts, o); });
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outs,
                                                     std::vector<at::Tensor>& ins,
                                                     const c10d::AllgatherOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.allgather_coalesced(outs, ins, o); });
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                        const c10d::GatherOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.gather(outs, ins, o); });
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outs, std::vector<std::vector<at::Tensor>>& ins,
                                         const c10d::ScatterOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.scatter(outs, ins, o); });
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outs,
                                                std::vector<std::vector<at::Tensor>>& ins,
                                                const c10d::ReduceScatterOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.reduce_scatter(outs, ins, o); });
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& out, at::Tensor& in, std::vector<int64_t>& out_splits,
                                               std::vector<int64_t>& in_splits,
                                               const c10d::AllToAllOptions& o) override {
    return gloo_op([&](c10d::Backend& b) { return b.alltoall_base(out, in, out_splits, in_splits, o); });
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& ts, int dst, int tag) override {
    return gloo_op([&](c10d::Backend& b) { return b.send(ts, dst, tag); });
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& ts, int src, int tag) override {
    return gloo_op([&](c10d::Backend& b) { return b.recv(ts, src, tag); });
  }

 private:
  // Runs one collective on the calling thread; its failure goes into the
  // returned work, as a backend's asynchronous failure would.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, std::vector<at::Tensor> result, Body body) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::exception_ptr failure;
    try {
      body(Clock::now() + spec_.timeout);
    } catch (...) {
      failure = std::current_exception();
    }
    return c10::make_intrusive<FinishedWork>(type, std::move(result), failure);
  }

  template <typename Call>
  c10::intrusive_ptr<c10d::Work> gloo_op(Call call) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!gloo_) {
      BackendSpec all = spec_;
      all.store = c10::make_intrusive<c10d::PrefixStore>("gloo", spec_.store);
      gloo_ = make_gloo_backend(all);
    }
    return call(*gloo_);
  }

  // A leader's step between nodes; a failure there stops the node's other
  // ranks (waiting for the leader's broadcast) at once.
  template <typename Call>
  void across_nodes(Clock::time_point deadline, const char* op, Call call) {
    if (topo_.local_rank != 0) return;
    try {
      auto work = call();
      auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
      work->wait(std::max(Millis(1), left));
    } catch (const Error& e) {
      seg_->abort(static_cast<int>(e.status()), std::string(op) + " between nodes failed on rank " +
                                                   std::to_string(getRank()) + ": " + e.what());
      throw;
    } catch (const std::exception& e) {
      seg_->abort(static_cast<int>(Status::PeerFailed), std::string(op) + " between nodes failed on rank " + std::to_string(getRank()) + ": " + e.what());
      throw;
    }
  }

  bool gather_outputs_fit(const std::vector<at::Tensor>& outs, const at::Tensor& in) const {
    if (static_cast<int>(outs.size()) != getSize()) return false;
    for (auto& t : outs)
      if (!plain_cpu(t) || t.scalar_type() != in.scalar_type() || t.numel() != in.numel()) return false;
    return true;
  }

  int next_half() { return static_cast<int>(pieces_++ & 1); }

  // The call descriptor every rank compares at the call's first barrier.
  enum CallKind : uint32_t { kAllReduce = 1, kReduce, kBroadcast, kAllGather, kBarrier };
  static std::string describe(const shm::Segment::Call& c) {
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
  void announce(CallKind kind, int reduce_op, const at::Tensor* t, int root) {
    shm::Segment::Call c;
    c.what = kind | (static_cast<uint32_t>(reduce_op + 1) << 8) | (static_cast<uint32_t>(root + 1) << 16);
    if (t) {
      c.dtype = static_cast<int32_t>(t->scalar_type());
      c.count = t->numel();
    }
    seg_->announce(c, &ShmBackend::describe);
  }

  // All-reduce (root < 0) or reduce to `root` (a local rank) over this
  // node's ranks, in place, with the same bits as Gloo's all-reduce: every
  // ring chunk is combined in its ring order (ring_order.h).
  void reduce_local(const at::Tensor& t, ReduceKind kind, int root, Clock::time_point deadline, const char* op) {
    const size_t n = static_cast<size_t>(seg_->size());
    const int me = seg_->rank();
    const size_t esz = t.element_size(), total = static_cast<size_t>(t.numel());
    const size_t chunk = shm::ring_chunk_elements(total, esz, n);
    const c10::ScalarType type = t.scalar_type();
    auto* data = static_cast<uint8_t*>(t.data_ptr());
    const bool keep = root < 0 || root == me;
    announce(root < 0 ? kAllReduce : kReduce, static_cast<int>(kind), &t, root);
    auto slot = [&](size_t r, int h) { return seg_->slot(static_cast<int>(r), h); };

    if (total * esz <= kWholePieceBytes) {
      // One piece, one barrier: every rank combines all of it itself.
      const int h = next_half();
      std::memcpy(slot(me, h), data, total * esz);
      seg_->barrier(deadline, op);
      if (!keep) return;
      for (size_t a = 0; a < total;) {
        const size_t c = a / chunk, b = std::min(total, (c + 1) * chunk);
        std::memcpy(data + a * esz, slot(shm::ring_rank_at_step(c, 0, n), h) + a * esz, (b - a) * esz);
        for (size_t step = 1; step < n; ++step)
          shm::accumulate(type, kind, data + a * esz, slot(shm::ring_rank_at_step(c, step, n), h) + a * esz, b - a);
        a = b;
      }
      return;
    }
    // Piece q holds every chunk's q-th part of `part` elements. Chunk c's
    // part is combined in place in the slot of rank c-1, whose value the
    // ring order starts from; the others read the result from there.
    const size_t part = seg_->slot_bytes() / esz / n;
    const size_t mine = (static_cast<size_t>(me) + 1) % n;
    for (size_t q = 0; q * part < chunk; ++q) {
      const int h = next_half();
      auto span = [&](size_t c) {  // chunk c's part of this piece: [first, first + len)
        size_t first = std::min(total, c * chunk + q * part);
        size_t last = std::min({total, (c + 1) * chunk, c * chunk + (q + 1) * part});
        return std::make_pair(first, last > first ? last - first : 0);
      };
      for (size_t c = 0; c < n; ++c) {
        auto [first, len] = span(c);
        std::memcpy(slot(me, h) + c * part * esz, data + first * esz, len * esz);
      }
      seg_->barrier(deadline, op);
      auto [first, len] = span(mine);
      (void)first;
      uint8_t* acc = slot(me, h) + mine * part * esz;
      for (size_t step = 1; step < n; ++step)
        shm::accumulate(type, kind, acc, slot(shm::ring_rank_at_step(mine, step, n), h) + mine * part * esz, len);
      seg_->barrier(deadline, op);
      if (keep)
        for (size_t c = 0; c < n; ++c) {
          auto [cfirst, clen] = span(c);
          std::memcpy(data + cfirst * esz, slot(shm::ring_rank_at_step(c, 0, n), h) + c * part * esz, clen * esz);
        }
    }
  }

  void broadcast_local(const at::Tensor& t, int root, Clock::time_point deadline, const char* op) {
    const int me = seg_->rank();
    announce(kBroadcast, -1, &t, root);
    const size_t bytes = t.nbytes();
    auto* data = static_cast<uint8_t*>(t.data_ptr());
    for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += seg_->slot_bytes()) {
      const size_t len = std::min(seg_->slot_bytes(), bytes - off);
      const int h = next_half();
      if (me == root) std::memcpy(seg_->slot(root, h), data + off, len);
      seg_->barrier(deadline, op);
      if (me != root) std::memcpy(data + off, seg_->slot(root, h), len);
      if (bytes == 0) break;
    }
  }

  void gather_local(const at::Tensor& in, const std::vector<uint8_t*>& dst, Clock::time_point deadline) {
    const int n = seg_->size(), me = seg_->rank();
    announce(kAllGather, -1, &in, -1);
    const size_t bytes = in.nbytes();
    auto* src = static_cast<const uint8_t*>(in.data_ptr());
    for (size_t off = 0; off < bytes || (off == 0 && bytes == 0); off += seg_->slot_bytes()) {
      const size_t len = std::min(seg_->slot_bytes(), bytes - off);
      const int h = next_half();
      std::memcpy(seg_->slot(me, h), src + off, len);
      seg_->barrier(deadline, "all_gather");
      for (int r = 0; r < n; ++r) std::memcpy(dst[r] + off, seg_->slot(r, h), len);
      if (bytes == 0) break;
    }
  }

  BackendSpec spec_;
  Topology topo_;
  std::unique_ptr<shm::Segment> seg_;
  c10::intrusive_ptr<c10d::Backend> leaders_;  // Gloo between the nodes' local rank 0 (nodes > 1)
  c10::intrusive_ptr<c10d::Backend> gloo_;     // Gloo over every rank, made on first use
  std::mutex mutex_;
  uint64_t pieces_ = 0;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_shm_backend(const BackendSpec& spec) {
  if (spec.device.type != DeviceType::CPU)
    fail(Status::Unsupported, "the shm backend runs on CPU tensors only; use nccl for CUDA");
  Topology topo = find_topology(*spec.store, spec);
  std::string why_not;
  auto seg_store = c10::make_intrusive<c10d::PrefixStore>("segment" + std::to_string(topo.node_index), spec.store);
  auto segment = shm::Segment::open(*seg_store, topo.local_rank, topo.local_ranks, slot_bytes(), spec.timeout, &why_not);
  // Every rank must take the same road, whatever happened on other nodes.
  auto usable = gather_strings(*spec.store, "usable", spec.rank, spec.size, segment ? "1" : "0", spec.timeout);
  if (std::count(usable.begin(), usable.end(), "1") != spec.size) {
    BackendSpec all = spec;
    all.store = c10::make_intrusive<c10d::PrefixStore>("gloo", spec.store);
    return make_gloo_backend(all);
  }
  c10::intrusive_ptr<c10d::Backend> leaders;
  if (topo.nodes > 1 && topo.local_rank == 0) {
    BackendSpec lead = spec;
    lead.store = c10::make_intrusive<c10d::PrefixStore>("leaders", spec.store);
    lead.rank = topo.node_index;
    lead.size = topo.nodes;
    leaders = make_gloo_backend(lead);
  }
  return c10::make_intrusive<ShmBackend>(spec, std::move(topo), std::move(segment), std::move(leaders));
}

}  // namespace ddp::core
