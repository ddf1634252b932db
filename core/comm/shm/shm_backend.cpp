// The "shm" c10d backend: collectives between the ranks of one host through
// a shared-memory segment (shm/local_collectives.h), Gloo between hosts, and
// Gloo for whatever it does not implement itself. Collectives run in call
// order on an executor (shm/executor.h): small ones on the caller's thread,
// large ones on a worker thread.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>

#include "comm/backend_factory.h"
#include "comm/direct_collectives.h"
#include "comm/store_monitor.h"
#include "comm/shm/executor.h"
#include "comm/shm/local_collectives.h"
#include "comm/shm/reduce_kernels.h"
#include "comm/shm/segment.h"
#include "comm/staging_pool.h"
#include "common/error.h"
#include "tensor/tensors.h"

namespace ddp::core {
namespace {

using shm::ReduceKind;

// Per rank and half. Small enough that a piece stays in the caches between
// being written by one rank and read by the others (512 KiB measured best
// on 2 and 4 ranks, bench/run_shm.sh), so a 25 MiB bucket takes about a
// hundred pieces.
constexpr size_t kSlotBytes = size_t{512} << 10;
// How often a leader waiting for the other nodes looks at what the group was told.
constexpr Millis kLeaderWaitSlice{100};
// The integer environment variable `name` within [lo, hi] (`unit` names it
// in the message), or none when unset or empty.
std::optional<long> env_within(const char* name, long lo, long hi, const char* unit) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  long value = std::strtol(v, &end, 10);
  check_arg(*end == 0 && value >= lo && value <= hi, std::string(name) + "='" + v + "' is not a number of " + unit +
                                                         " from " + std::to_string(lo) + " to " + std::to_string(hi));
  return value;
}
// DDP_SHM_SLOT_KIB overrides it (64 KiB to 256 MiB; every rank of a host
// must use the same value), for measuring.
size_t slot_bytes() {
  return static_cast<size_t>(env_within("DDP_SHM_SLOT_KIB", 64, 256 << 10, "KiB").value_or(kSlotBytes >> 10)) << 10;
}
// DDP_SHM_SHARED_BUCKETS=0: no shared buckets (shared_bucket answers none),
// for measuring what they save; every rank of a host must use the same value.
bool shared_buckets_enabled() { return env_within("DDP_SHM_SHARED_BUCKETS", 0, 1, "0 or 1").value_or(1) == 1; }
// DDP_SHM_POSTED_BROADCAST=0: a broadcast's root waits in the barrier as
// its peers do (see LocalCollectives), for measuring what posting saves.
// Only the root's side differs, so ranks with different values still agree.
bool posted_broadcast_enabled() {
  return env_within("DDP_SHM_POSTED_BROADCAST", 0, 1, "0 or 1").value_or(1) == 1;
}
// DDP_SHM_POST_RING: how many calls ahead of its peers a posting root may
// run (1 to 32, default 24), for measuring what the ring saves. Only the
// root's side differs.
int post_ring_depth() {
  return static_cast<int>(env_within("DDP_SHM_POST_RING", 1, shm::Segment::kPostRing, "calls")
                              .value_or(shm::Segment::kPostDepth));
}
// DDP_SHM_SPIN_US: how long a wait spins before it sleeps (0 to 1 s), for measuring and tuning.
std::optional<shm::Nanos> spin_time() {
  auto us = env_within("DDP_SHM_SPIN_US", 0, 1000000, "microseconds");
  return us ? std::optional<shm::Nanos>(std::chrono::microseconds(*us)) : std::nullopt;
}
// DDP_SHM_CMA=0: no reads of a peer's memory (Segment::cma), every byte
// through the slots, for measuring and for a host whose check passes where
// reads later fail; every rank of a host must use the same value.
bool reads_enabled() { return env_within("DDP_SHM_CMA", 0, 1, "0 or 1").value_or(1) == 1; }
// DDP_SHM_STREAMING=1 or 0: every call that chooses how it writes (reduces,
// broadcasts and all-gathers through the slots, shared buckets: see
// shm/write_mode.h) streams its writes past the caches, or keeps them
// cached, instead of the way local rank 0 measures faster, for measuring.
std::optional<shm::WriteMode> writes_forced() {
  auto v = env_within("DDP_SHM_STREAMING", 0, 1, "0 or 1");
  if (!v) return std::nullopt;
  return *v == 1 ? shm::WriteMode::Streaming : shm::WriteMode::Cached;
}
// DDP_SHM_LIGHT_WAKES=0: this rank's barriers make a full fence before they
// look for sleeping peers, where by default the sleepers fence (Segment::
// raise_phase), for measuring what that saves.
bool light_wakes() { return env_within("DDP_SHM_LIGHT_WAKES", 0, 1, "0 or 1").value_or(1) == 1; }
// The segment a group or a shared bucket opens: the switches above.
shm::Segment::Options segment_options(size_t slot, int halves) {
  shm::Segment::Options o;
  o.slot_bytes = slot;
  o.spin = spin_time();
  o.halves = halves;
  o.reads = reads_enabled();
  o.light_wakes = light_wakes();
  return o;
}
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

// Where each of `world` ranks' parts of a gathered `out` begins: `part` bytes apart.
std::vector<uint8_t*> rank_parts(const at::Tensor& out, size_t part, int world) {
  auto* base = static_cast<uint8_t*>(out.data_ptr());
  std::vector<uint8_t*> dst;
  for (int r = 0; r < world; ++r) dst.push_back(base + static_cast<size_t>(r) * part);
  return dst;
}

// Where this rank's host and the others' are: ranks grouped by node id.
struct Topology {
  std::vector<int> local_ranks;  // group ranks on this node, ascending
  int local_rank = 0;            // index of this rank in local_ranks
  int node_index = 0;            // nodes numbered by their lowest rank
  int nodes = 1;
};

// Whether every collective runs on the caller's thread (shm/executor.h):
// when the host's ranks have no core to spare for a worker (as many ranks as
// the CPUs this process may use, or more). DDP_SHM_INLINE=1 or 0 decides
// instead, for measuring; every rank may choose differently.
bool inline_always(const Topology& topo) {
  if (auto forced = env_within("DDP_SHM_INLINE", 0, 1, "0 or 1")) return *forced == 1;
  const int cpus = shm::cpus_available();
  return cpus > 0 && cpus <= static_cast<int>(topo.local_ranks.size());
}

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

class ShmBackend final : public c10d::Backend, public DirectCollectives {
 public:
  ShmBackend(const BackendSpec& spec, Topology topo, std::unique_ptr<shm::Segment> segment,
             c10::intrusive_ptr<c10d::Backend> leaders, std::optional<shm::WriteMode> writes)
      : Backend(spec.rank, spec.size),
        spec_(spec),
        timeout_ms_(spec.timeout.count()),
        topo_(std::move(topo)),
        local_(std::move(segment), posted_broadcast_enabled() ? shm::LocalCollectives::kPostBytes : 0, writes),
        leaders_(std::move(leaders)),
        executor_(std::make_unique<shm::Executor>(inline_always(topo_))) {}

  // The executor goes first: its worker may still be running a collective
  // that uses the members below.
  ~ShmBackend() override { executor_.reset(); }

  const std::string getBackendName() const override { return "shm"; }

  void setTimeout(std::chrono::milliseconds timeout) override {
    timeout_ms_ = timeout.count();
    std::lock_guard<std::mutex> lock(gloo_mutex_);
    if (leaders_) leaders_->setTimeout(timeout);
    if (gloo_) gloo_->setTimeout(timeout);
  }

  // What this backend performs itself (the rest goes to Gloo): its c10d
  // calls below and the performs_* queries decide by the same predicates.
  bool reduces(const at::Tensor& t, const c10d::ReduceOp& op) const {
    auto kind = reduce_kind(op);
    return plain_cpu(t) && kind && shm::reduce_supported(t.scalar_type(), *kind);
  }
  bool gathers(const at::Tensor& in, const at::Tensor& out) const {
    return topo_.nodes == 1 && plain_cpu(in) && plain_cpu(out) && out.scalar_type() == in.scalar_type() &&
           out.numel() == in.numel() * getSize();
  }

  bool performs_all_reduce(const at::Tensor& t, const c10d::ReduceOp& op) const override {
    return reduces(t, op) && !executor_->on_worker();
  }
  bool performs_reduce(const at::Tensor& t, const c10d::ReduceOp& op) const override {
    return topo_.nodes == 1 && reduces(t, op) && !executor_->on_worker();
  }
  bool performs_broadcast(const at::Tensor& t) const override {
    return topo_.nodes == 1 && plain_cpu(t) && !executor_->on_worker();
  }
  bool performs_all_gather(const at::Tensor& in, const at::Tensor& out) const override {
    return gathers(in, out) && !executor_->on_worker();
  }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& ts, const c10d::AllreduceOptions& o) override {
    if (ts.size() != 1 || !reduces(ts[0], o.reduceOp))
      return gloo_op([&](c10d::Backend& b) { return b.allreduce(ts, o); });
    at::Tensor t = ts[0];
    c10d::ReduceOp op = o.reduceOp;
    ReduceKind k = *reduce_kind(op);
    return submit(c10d::OpType::ALLREDUCE, ts, t.nbytes(), [this, t, op, k](const shm::Deadline& deadline) {
      all_reduce_body(t, k, op, deadline);
    });
  }

  // The blocking caller's own thread performs it, when the executor is idle
  // (what allreduce() would queue behind goes first otherwise).
  bool all_reduce_now(const at::Tensor& t, const c10d::ReduceOp& op) override {
    if (!reduces(t, op)) return false;
    return executor_->run_now([&] { all_reduce_body(t, *reduce_kind(op), op, deadline()); });
  }
  bool barrier_now() override {
    return topo_.nodes == 1 && executor_->run_now([&] { local_.barrier(deadline()); });
  }
  bool broadcast_now(const at::Tensor& t, int root) override {
    return topo_.nodes == 1 && plain_cpu(t) &&
           executor_->run_now([&] { local_.broadcast(t, root, deadline(), "broadcast"); });
  }

  bool all_gather_now(const at::Tensor& in, const at::Tensor& out) override {
    if (topo_.nodes > 1 || !plain_cpu(in) || !plain_cpu(out)) return false;
    return executor_->run_now([&] { local_.all_gather(in, rank_parts(out, in.nbytes(), getSize()), deadline()); });
  }

  // One node only: between nodes the leaders all-reduce one flat tensor.
  bool takes_parts(c10::ScalarType type) const override {
    return topo_.nodes == 1 && (type == c10::kFloat || type == c10::kDouble);
  }
  c10::intrusive_ptr<c10d::Work> all_reduce_parts(std::vector<at::Tensor> parts, double scale) override {
    check_arg(!parts.empty() && takes_parts(parts[0].scalar_type()), "shm: all_reduce_parts takes float or double "
                                                                      "parts on one node");
    std::vector<shm::Elements::Run> runs;
    size_t bytes = 0;
    for (auto& p : parts) {
      check_arg(plain_cpu(p) && p.scalar_type() == parts[0].scalar_type(),
                "shm: all_reduce_parts takes contiguous CPU parts of one dtype");
      runs.push_back({static_cast<uint8_t*>(p.data_ptr()), static_cast<size_t>(p.numel())});
      bytes += p.nbytes();
    }
    const c10::ScalarType type = parts[0].scalar_type();
    return submit(c10d::OpType::ALLREDUCE, std::move(parts), bytes,
                  [this, runs = std::move(runs), type, scale](const shm::Deadline& deadline) {
                    local_.reduce(shm::Elements(type, runs, scale), ReduceKind::Sum, -1, deadline, "all_reduce");
                  });
  }

  void abort_local(Status status, const std::string& reason) override {
    local_.segment().abort(static_cast<int>(status), reason);
  }
  void settle(Clock::time_point deadline) override { executor_->settle(deadline); }

  bool offers_shared_buckets() const override {
    return topo_.nodes == 1 && getSize() > 1 && shared_buckets_enabled();
  }
  at::Tensor shared_bucket(c10::ScalarType type, int64_t numel) override {
    if (!offers_shared_buckets() || numel <= 0 || !shm::reduce_supported(type, ReduceKind::Sum)) return {};
    // Ids wrap below 2^16 - 1: the call a rank announces carries one (plus one) in 16 bits.
    const uint16_t id = static_cast<uint16_t>(shared_buckets_++ % 65535);
    const size_t bytes = static_cast<size_t>(numel) * c10::elementSize(type);
    auto store = c10::make_intrusive<c10d::PrefixStore>("shared_bucket/" + std::to_string(shared_buckets_ - 1),
                                                        spec_.store);
    std::string why_not;
    std::shared_ptr<shm::Segment> memory =
        shm::Segment::open(*store, topo_.local_rank, topo_.local_ranks,
                           segment_options((bytes + 4095) / 4096 * 4096, /*halves=*/1), Millis(timeout_ms_.load()),
                           &why_not);
    if (!memory) return {};  // every rank learns that together: all use ordinary memory
    local_.add_shared(memory, id);
    void* data = memory->slot(memory->rank(), 0);
    return at::from_blob(
        data, {numel}, [memory](void*) mutable { memory.reset(); }, at::TensorOptions().dtype(type));
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& ts, const c10d::ReduceOptions& o) override {
    if (topo_.nodes > 1 || ts.size() != 1 || !reduces(ts[0], o.reduceOp))
      return gloo_op([&](c10d::Backend& b) { return b.reduce(ts, o); });
    at::Tensor t = ts[0];
    int root = static_cast<int>(o.rootRank);
    ReduceKind k = *reduce_kind(o.reduceOp);
    return submit(c10d::OpType::REDUCE, ts, t.nbytes(), [this, t, root, k](const shm::Deadline& deadline) {
      local_.reduce(t, k, root, deadline, "reduce");
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& ts, const c10d::BroadcastOptions& o) override {
    if (topo_.nodes > 1 || !single_plain(ts))
      return gloo_op([&](c10d::Backend& b) { return b.broadcast(ts, o); });
    at::Tensor t = ts[0];
    int root = static_cast<int>(o.rootRank);
    return submit(c10d::OpType::BROADCAST, ts, t.nbytes(), [this, t, root](const shm::Deadline& deadline) {
      local_.broadcast(t, root, deadline, "broadcast");
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outs, std::vector<at::Tensor>& ins,
                                           const c10d::AllgatherOptions& o) override {
    if (topo_.nodes > 1 || !single_plain(ins) || outs.size() != 1 || !gather_outputs_fit(outs[0], ins[0]))
      return gloo_op([&](c10d::Backend& b) { return b.allgather(outs, ins, o); });
    at::Tensor in = ins[0];
    std::vector<at::Tensor> out = outs[0];  // held by the work: the pointers below stay valid
    std::vector<uint8_t*> dst;
    for (auto& t : out) dst.push_back(static_cast<uint8_t*>(t.data_ptr()));
    return submit(c10d::OpType::ALLGATHER, out, in.nbytes() * getSize(), [this, in, dst](const shm::Deadline& deadline) {
      local_.all_gather(in, dst, deadline);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& out, at::Tensor& in,
                                                 const c10d::AllgatherOptions& o) override {
    if (!gathers(in, out))
      return gloo_op([&](c10d::Backend& b) { return b._allgather_base(out, in, o); });
    std::vector<uint8_t*> dst = rank_parts(out, in.nbytes(), getSize());
    at::Tensor input = in;
    return submit(c10d::OpType::_ALLGATHER_BASE, {out}, out.nbytes(), [this, input, dst](const shm::Deadline& deadline) {
      local_.all_gather(input, dst, deadline);
    });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& o) override {
    if (topo_.nodes > 1) return gloo_op([&](c10d::Backend& b) { return b.barrier(o); });
    return submit(c10d::OpType::BARRIER, {}, 0, [this](const shm::Deadline& deadline) { local_.barrier(deadline); });
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
  // A collective's deadline (shm::Deadline: counted from its first wait).
  shm::Deadline deadline() const { return shm::Deadline(Millis(timeout_ms_.load())); }

  void all_reduce_body(const at::Tensor& t, ReduceKind k, const c10d::ReduceOp& op, const shm::Deadline& deadline) {
    local_.reduce(t, k, -1, deadline, "all_reduce");
    if (topo_.nodes == 1) return;
    // Gloo may go on with its work after a failed wait (a stopped node that
    // resumes still sends): never on the caller's memory (comm/caller_memory.h)
    // but on a copy, in buffers kept for the next calls as a group keeps its own.
    at::Tensor between = t;
    if (is_caller_memory(t) && topo_.local_rank == 0) {
      between = leader_staging_.like(t);
      between.copy_(t);
    }
    across_nodes(deadline, "all_reduce", [&]() {
      std::vector<at::Tensor> one{between};
      c10d::AllreduceOptions lo;
      lo.reduceOp = op;
      return leaders_->allreduce(one, lo);
    });
    if (!between.is_same(t)) t.copy_(between);
    local_.broadcast(t, 0, deadline, "all_reduce");
  }

  // `body(deadline)` performs the collective on the executor; the deadline
  // counts from its first wait.
  template <typename Body>
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, std::vector<at::Tensor> result, size_t bytes, Body body) {
    // A job queued before the group broke touches none of its tensors
    // after (see settle()): the body would copy some before its first wait.
    return executor_->submit(type, std::move(result), bytes, [this, body = std::move(body)]() {
      local_.segment().check_abort("a queued collective");
      body(deadline());
    });
  }

  template <typename Call>
  c10::intrusive_ptr<c10d::Work> gloo_op(Call call) {
    std::lock_guard<std::mutex> lock(gloo_mutex_);
    if (!gloo_) connect_gloo();
    return call(*gloo_);
  }

  // Gloo over every rank, on first use. Where it cannot connect this rank,
  // the others learn why at once (their waits for it read the group's
  // reports), as when a backend fails at the group's start; and every later
  // call that needs it gets the same error instead of a new attempt.
  void connect_gloo() {
    if (gloo_failure_) throw *gloo_failure_;
    BackendSpec all = spec_;
    all.timeout = Millis(timeout_ms_.load());
    all.store = c10::make_intrusive<c10d::PrefixStore>("gloo", spec_.store);
    try {
      gloo_ = make_gloo_backend(all);
    } catch (const std::exception& e) {
      gloo_failure_ = backend_connect_failure(spec_, e, "the Gloo backend that shm uses for what it does not do itself");
      throw *gloo_failure_;
    }
  }

  // A leader's step between nodes; a failure there stops the node's other
  // ranks (waiting for the leader's broadcast) at once.
  template <typename Call>
  void across_nodes(const shm::Deadline& deadline, const char* op, Call call) {
    if (topo_.local_rank != 0) return;
    auto stop_the_node = [&](Status status, const char* what) {
      local_.segment().abort(static_cast<int>(status), std::string(op) + " between nodes failed on rank " +
                                                           std::to_string(getRank()) + ": " + what);
    };
    try {
      auto work = call();
      // In slices, so that a node the launcher found dead (the group's
      // monitor) ends the wait within its heartbeat window, not at the
      // collective's timeout: a stopped node's sockets stay open.
      for (;;) {
        auto left = std::chrono::duration_cast<Millis>(deadline.at() - Clock::now());
        try {
          work->wait(std::max(Millis(1), std::min(kLeaderWaitSlice, left)));
          break;
        } catch (...) {
          if (Clock::now() >= deadline.at()) throw;
          if (work->isCompleted()) {
            work->wait(Millis(1));  // done in the meantime: its own answer counts
            break;
          }
        }
        if (spec_.peer_report)
          if (auto r = spec_.peer_report()) fail(Status::PeerFailed, parse_report(*r).second);
      }
    } catch (const Error& e) {
      stop_the_node(e.status(), e.what());
      throw;
    } catch (const std::exception& e) {
      stop_the_node(Status::PeerFailed, e.what());
      throw;
    }
  }

  bool gather_outputs_fit(const std::vector<at::Tensor>& outs, const at::Tensor& in) const {
    if (static_cast<int>(outs.size()) != getSize()) return false;
    for (auto& t : outs)
      if (!plain_cpu(t) || t.scalar_type() != in.scalar_type() || t.numel() != in.numel()) return false;
    return true;
  }

  BackendSpec spec_;
  std::atomic<int64_t> timeout_ms_;
  Topology topo_;
  shm::LocalCollectives local_;
  c10::intrusive_ptr<c10d::Backend> leaders_;  // Gloo between the nodes' local rank 0 (nodes > 1)
  StagingPool leader_staging_;                  // copies of caller memory for leaders_
  std::mutex gloo_mutex_;
  c10::intrusive_ptr<c10d::Backend> gloo_;  // Gloo over every rank, made on first use
  std::optional<Error> gloo_failure_;        // why it could not be made
  uint64_t shared_buckets_ = 0;  // made so far (shared_bucket)
  std::unique_ptr<shm::Executor> executor_;
};

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_shm_backend(const BackendSpec& spec) {
  if (spec.device.type != DeviceType::CPU)
    fail(Status::Unsupported, "the shm backend runs on CPU tensors only; use nccl for CUDA");
  Topology topo = find_topology(*spec.store, spec);
  std::string why_not;
  auto seg_store = c10::make_intrusive<c10d::PrefixStore>("segment" + std::to_string(topo.node_index), spec.store);
  const int post_depth = post_ring_depth();  // refused before the segment is made, as the others
  const std::optional<shm::WriteMode> writes = writes_forced();
  auto segment = shm::Segment::open(*seg_store, topo.local_rank, topo.local_ranks, segment_options(slot_bytes(), 2),
                                    spec.timeout, &why_not);
  if (segment) segment->set_post_depth(post_depth);
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
  return c10::make_intrusive<ShmBackend>(spec, std::move(topo), std::move(segment), std::move(leaders), writes);
}

}  // namespace ddp::core
