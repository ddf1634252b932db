#include "comm/collectives.h"

#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/tensor.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "comm/caller_memory.h"
#include "comm/direct_collectives.h"
#include "comm/failure.h"
#include "common/error.h"
#include "tensor/tensors.h"

namespace ddp::core {
namespace {

constexpr int64_t kMaxGatherDims = 16;

// Runs on every collective: the messages are built only when a check fails.
void check_tensor(Group& g, const at::Tensor& t, const char* op) {
  if (!t.defined()) fail(Status::InvalidArgument, std::string(op) + ": tensor is undefined");
  const bool cuda = g.device().type == DeviceType::CUDA;
  if (cuda ? !t.is_cuda() : !t.is_cpu())
    fail(Status::InvalidArgument, std::string(op) + ": tensor is on " + t.device().str() + " but the group's backend " +
                                      g.backend_name() + " works on " + (cuda ? "cuda" : "cpu") + " tensors");
  if (!t.is_contiguous()) fail(Status::InvalidArgument, std::string(op) + ": tensor must be contiguous");
}

void check_root(Group& g, int root, const char* op, const char* what) {
  if (root < 0 || root >= g.size())
    fail(Status::InvalidArgument, std::string(op) + ": " + what + " " + std::to_string(root) + " is outside [0, " +
                                      std::to_string(g.size()) + ")");
}

// Starts a c10d operation. A backend that refuses the call synchronously
// (a dtype or reduce op it does not support) does so before any
// communication, which leaves the group usable: Status::Unsupported. Only
// c10d's distributed errors (a broken communicator) are failures of the group.
// `ticket` is the call's flight recorder entry (0 for a later step of one),
// marked refused when the call never starts.
template <typename F>
c10::intrusive_ptr<c10d::Work> start(Group& g, const char* op, flight::Ticket ticket, F&& f) {
  try {
    return f(g.backend_for(op));
  } catch (const CallMismatch& e) {
    flight::finish(ticket, flight::State::Failed);
    g.record_call_mismatch(e.what());
    throw;
  } catch (const Error&) {
    flight::finish(ticket, flight::State::Refused);
    throw;
  } catch (const std::exception& e) {
    flight::finish(ticket, flight::State::Refused);
    Status s = dynamic_cast<const c10::DistError*>(&e) ? classify_exception(e) : Status::Unsupported;
    fail(s, std::string(op) + " on rank " + std::to_string(g.rank()) + " (" + g.backend_name() +
                "): " + short_what(e));
  }
}

c10d::ReduceOp to_c10d(ReduceOp op, bool native_avg) {
  switch (op) {
    case ReduceOp::Sum: return c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::Mean:
      return native_avg ? c10d::ReduceOp(c10d::ReduceOp::AVG) : c10d::ReduceOp(c10d::ReduceOp::SUM);
    case ReduceOp::Min: return c10d::ReduceOp(c10d::ReduceOp::MIN);
    case ReduceOp::Max: return c10d::ReduceOp(c10d::ReduceOp::MAX);
    case ReduceOp::Product: return c10d::ReduceOp(c10d::ReduceOp::PRODUCT);
  }
  fail(Status::InvalidArgument, "unknown reduce op");
}

// Lightning's sync_ddp: where the backend has no AVG (gloo), SUM and divide.
// Integers: true division, then truncation toward zero on the copy back.
void divide_by_world(const at::Tensor& t, int world) {
  if (at::isFloatingType(t.scalar_type()))
    t.div_(world);
  else
    t.copy_(t / world);
}

bool native_avg(Group& g) { return g.backend_name() == "nccl"; }

PendingPtr make(Group& g, const char* op, flight::Ticket ticket, c10::intrusive_ptr<c10d::Work> w,
                Pending::Step then = nullptr) {
  return std::make_unique<Pending>(g, op, std::move(w), std::move(then), ticket);
}

// A Pending for work on what `mem` staged: its copies back go before
// `then`, and it holds the caller memory `mem` gave the backend as it is.
PendingPtr make(Group& g, const char* op, flight::Ticket ticket, c10::intrusive_ptr<c10d::Work> w,
                const CallerMemory& mem, Pending::Step then = nullptr) {
  auto p = make(g, op, ticket, std::move(w), mem.after(std::move(then)));
  mem.hold(*p);
  return p;
}

// Whether a call on caller memory (`on_caller_memory`: some of its
// tensors are) may hand it to `g`'s backend as it is: the backend performs
// the call itself, as `asks` its DirectCollectives (performs_*)
// (comm/caller_memory.h).
template <typename Asks>
bool in_place(Group& g, const char* op, bool on_caller_memory, Asks&& asks) {
  if (!on_caller_memory) return false;
  DirectCollectives* direct = g.direct_for(op);
  return direct && asks(*direct);
}

thread_local const SoloSection* t_solo = nullptr;  // the innermost open on this thread

// SoloSection's refusal, for `op` about to start on `g`.
void refuse_inside_solo_section(Group& g, const char* op) {
  if (!t_solo || g.size() <= 1) return;
  fail(Status::State, std::string(op) + " on rank " + std::to_string(g.rank()) + ": called from " + t_solo->what() +
                          ", which this rank runs alone: the group's other ranks never join this call, which would "
                          "wait for them until the timeout (make collective calls outside it)");
}

// The flight recorder's entry for a collective about to start on `g`: on
// `t`, or on a 1-D tensor of `numel` elements of `type`. Every collective
// starts here (after verify_same_call where it has one, which refuses the
// same way first), so SoloSection's refusal is made here, before anything
// else.
flight::Ticket record(Group& g, const char* op, const char* reduce, const at::Tensor* t, int root = -1) {
  refuse_inside_solo_section(g, op);
  if (!flight::enabled()) return 0;
  flight::Call c;
  c.op = op;
  c.reduce = reduce;
  c.root = root;
  if (t) {
    c.dtype = c10::toString(t->scalar_type());
    c.numel = t->numel();
    c.ndim = static_cast<int>(t->dim());
    for (int d = 0; d < c.ndim && d < flight::kMaxDims; ++d) c.dims[d] = t->size(d);
  }
  return flight::record(g.flight_label(), g.next_flight_seq(), c);
}
flight::Ticket record(Group& g, const char* op, const char* reduce, at::ScalarType type, int64_t numel) {
  refuse_inside_solo_section(g, op);
  if (!flight::enabled()) return 0;
  flight::Call c;
  c.op = op;
  c.reduce = reduce;
  c.dtype = c10::toString(type);
  c.numel = numel;
  c.ndim = 1;
  c.dims[0] = numel;
  return flight::record(g.flight_label(), g.next_flight_seq(), c);
}

// all_gather of `in` into `out` (in's shape, one row per rank): one view of
// `out` per rank, which every backend takes. Neither may be caller memory.
c10::intrusive_ptr<c10d::Work> start_gather_work(Group& g, const char* op, const at::Tensor& in, const at::Tensor& out,
                                                 flight::Ticket ticket) {
  at::Tensor rows = out.view({g.size(), in.numel()});
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int i = 0; i < g.size(); ++i) outs[0].push_back(rows.select(0, i).view(in.sizes()));
  std::vector<at::Tensor> ins{in};
  return start(g, op, ticket, [&](c10d::Backend& b) { return b.allgather(outs, ins); });
}

// all_gather into the caller's `out` (checked by check_gather_output).
PendingPtr start_all_gather_into(Group& g, const char* op, const at::Tensor& in, const at::Tensor& out,
                                 flight::Ticket ticket) {
  const bool on_caller_memory = is_caller_memory(in) || is_caller_memory(out);
  CallerMemory mem(g, op, ticket, in_place(g, op, on_caller_memory, [&](DirectCollectives& d) {
                     return d.performs_all_gather(in, out);
                   }));
  const at::Tensor staged_in = mem.read(in), staged_out = mem.written(out);
  auto p = make(g, op, ticket, start_gather_work(g, op, staged_in, staged_out, ticket), mem);
  p->tensors = {out};
  return p;
}

// all_gather's result: (world, ...in.shape), not yet written.
at::Tensor empty_gathered(Group& g, const at::Tensor& in) {
  std::vector<int64_t> shape{g.size()};
  shape.insert(shape.end(), in.sizes().begin(), in.sizes().end());
  return at::empty(shape, in.options());
}

// all_gather into a new `out`, which libddp owns.
c10::intrusive_ptr<c10d::Work> start_all_gather(Group& g, const char* op, const at::Tensor& in,
                                                at::Tensor& out, flight::Ticket ticket = 0) {
  out = empty_gathered(g, in);
  return start_gather_work(g, op, CallerMemory(g, op, ticket).read(in), out, ticket);
}

// What all_gather_into needs of the caller's output, named when it is not so.
void check_gather_output(Group& g, const at::Tensor& in, const at::Tensor& out, const char* op) {
  if (!out.defined()) fail(Status::InvalidArgument, std::string(op) + ": out is undefined");
  if (out.device() != in.device())
    fail(Status::InvalidArgument, std::string(op) + ": out is on " + out.device().str() + ", in on " +
                                      in.device().str());
  if (!out.is_contiguous()) fail(Status::InvalidArgument, std::string(op) + ": out must be contiguous");
  if (out.scalar_type() != in.scalar_type())
    fail(Status::InvalidArgument, std::string(op) + ": out is " + c10::toString(out.scalar_type()) + ", in is " +
                                      c10::toString(in.scalar_type()));
  if (in.numel() > std::numeric_limits<int64_t>::max() / g.size())
    fail(Status::InvalidArgument, std::string(op) + ": in's " + std::to_string(in.numel()) +
                                      " elements times the world size overflow a tensor's element count");
  const int64_t want = in.numel() * g.size();
  if (out.numel() != want)
    fail(Status::InvalidArgument, std::string(op) + ": out has " + std::to_string(out.numel()) +
                                      " elements, not world size x in's = " + std::to_string(g.size()) + " x " +
                                      std::to_string(in.numel()));
  // `in` may be this rank's own part of `out`; anywhere else in `out` it
  // would be overwritten by another rank's part before all have read it.
  const auto* ib = static_cast<const uint8_t*>(in.data_ptr());
  const auto* ob = static_cast<const uint8_t*>(out.data_ptr());
  const size_t n = in.nbytes(), total = out.nbytes();
  const bool overlap = n && ib < ob + total && ob < ib + n;
  if (overlap && ib != ob + static_cast<size_t>(g.rank()) * n)
    fail(Status::InvalidArgument, std::string(op) + ": in overlaps out other than as rank " +
                                      std::to_string(g.rank()) + "'s own part of it");
}

// --- DDP_DEBUG=DETAIL: every rank checks that all call the same thing ----

enum CallKind : int64_t { kBarrier = 1, kBroadcast, kBroadcastBytes, kAllReduce, kReduce, kAllGather,
                          kAllGatherUneven, kBooleanDecision };
const char* kind_name(int64_t k) {
  static const char* names[] = {"?", "barrier", "broadcast", "broadcast_bytes", "all_reduce", "reduce",
                                "all_gather", "all_gather_uneven", "reduce_boolean_decision"};
  return k >= 1 && k <= 8 ? names[k] : "?";
}
const char* op_name(int64_t op) {
  static const char* names[] = {"sum", "mean", "min", "max", "product"};
  return op >= 0 && op <= 4 ? names[op] : "";
}

// What one rank is about to call, as a fixed-width row of int64 (so that the
// exchange itself can never mismatch): sequence number, kind, reduce op,
// dtype, root, ndim, element count, then up to kMaxGatherDims sizes.
constexpr int64_t kSigWidth = 7 + kMaxGatherDims;
struct CallSignature {
  CallKind kind;
  int64_t op = -1, root = -1;
  const at::Tensor* tensor = nullptr;
};

std::string describe(const int64_t* row) {
  std::string s = kind_name(row[1]);
  if (row[2] >= 0) s += std::string("(") + op_name(row[2]) + ")";
  if (row[4] >= 0) s += " root " + std::to_string(row[4]);
  if (row[3] >= 0) {
    s += std::string(" ") + c10::toString(static_cast<at::ScalarType>(row[3])) + "[";
    for (int64_t d = 0; d < row[5] && d < kMaxGatherDims; ++d) s += (d ? "," : "") + std::to_string(row[7 + d]);
    s += "]";
  }
  return s + " (checked call #" + std::to_string(row[0]) + ")";
}

void verify_same_call(Group& g, const CallSignature& sig) {
  // The comparison itself communicates: a call that SoloSection refuses
  // must not get that far.
  refuse_inside_solo_section(g, kind_name(sig.kind));
  if (!g.detail_checks()) return;
  std::vector<int64_t> mine(kSigWidth, -1);
  mine[0] = g.next_check();
  mine[1] = sig.kind;
  mine[2] = sig.op;
  mine[4] = sig.root;
  if (sig.tensor) {
    const at::Tensor& t = *sig.tensor;
    mine[3] = static_cast<int64_t>(t.scalar_type());
    mine[5] = t.dim();
    mine[6] = t.numel();
    for (int64_t d = 0; d < t.dim() && d < kMaxGatherDims; ++d) mine[7 + d] = t.size(d);
  }
  at::Tensor row = at::tensor(mine, at::TensorOptions().dtype(at::kLong));
  if (g.device().type == DeviceType::CUDA) row = row.to(at::Device(at::kCUDA, g.device().index));
  at::Tensor rows;
  auto w = start_all_gather(g, "debug check", row, rows);
  Pending(g, "debug check", w, nullptr).wait();
  at::Tensor all = rows.cpu();
  const int64_t* a = all.data_ptr<int64_t>();
  // Which fields must agree: everything, except the sizes for the uneven
  // gather (only ndim) and the payload of broadcast_bytes (read on src only).
  auto same = [&](const int64_t* x, const int64_t* y) {
    if (x[0] != y[0] || x[1] != y[1] || x[2] != y[2] || x[4] != y[4]) return false;
    if (x[1] == kBroadcastBytes || x[1] == kBarrier || x[1] == kBooleanDecision) return true;
    if (x[3] != y[3] || x[5] != y[5]) return false;
    if (x[1] == kAllGatherUneven) return true;
    for (int64_t k = 6; k < kSigWidth; ++k)
      if (x[k] != y[k]) return false;
    return true;
  };
  std::string differ;
  for (int r = 1; r < g.size(); ++r)
    if (!same(a, a + r * kSigWidth)) differ += "; rank " + std::to_string(r) + ": " + describe(a + r * kSigWidth);
  if (differ.empty()) return;
  fail(Status::InvalidArgument, std::string("DDP_DEBUG=DETAIL: the ranks did not call the same collective (rank 0: ") +
                                   describe(a) + differ + "); nothing was sent and the group stays usable");
}


// A blocking collective, already checked and recorded (`ticket`), through
// the backend's direct path: `now(direct)` performs it, or returns false
// when the backend wants the c10d path, which `pending()` then starts and
// this waits for. A failure is classified, recorded and published as
// Pending::wait does with a work's failure. Returns whether the direct path
// performed it (the c10d path's Pending ran its own host steps).
template <typename Now, typename StartPending>
bool run_direct(Group& g, const char* op, flight::Ticket ticket, DirectCollectives& direct, Now&& now,
                StartPending&& pending) {
  flight::waiting_since_enqueue(ticket);
  bool done;
  try {
    done = now(direct);
  } catch (...) {
    Pending(g, op, nullptr, nullptr, ticket).throw_failure(std::current_exception());
  }
  if (!done) {
    pending()->wait();
    return false;
  }
  flight::finish(ticket, flight::State::Completed);
  return true;
}

// barrier and broadcast after their checks and their flight record.
PendingPtr start_barrier(Group& g, flight::Ticket ticket) {
  return make(g, "barrier", ticket, start(g, "barrier", ticket, [](c10d::Backend& b) { return b.barrier(); }));
}
PendingPtr start_broadcast(Group& g, const at::Tensor& t, int src, flight::Ticket ticket) {
  CallerMemory mem(g, "broadcast", ticket, in_place(g, "broadcast", is_caller_memory(t), [&](DirectCollectives& d) {
                     return d.performs_broadcast(t);
                   }));
  std::vector<at::Tensor> ts{g.rank() == src ? mem.read(t) : mem.written(t)};
  c10d::BroadcastOptions o;
  o.rootRank = src;
  auto w = start(g, "broadcast", ticket, [&](c10d::Backend& b) { return b.broadcast(ts, o); });
  return make(g, "broadcast", ticket, w, mem);
}

// all_reduce after its checks and its flight record.
PendingPtr start_all_reduce(Group& g, const at::Tensor& t, ReduceOp op, flight::Ticket ticket) {
  c10d::AllreduceOptions o;
  o.reduceOp = to_c10d(op, native_avg(g));
  CallerMemory mem(g, "all_reduce", ticket, in_place(g, "all_reduce", is_caller_memory(t), [&](DirectCollectives& d) {
                     return d.performs_all_reduce(t, o.reduceOp);
                   }));
  std::vector<at::Tensor> ts{mem.read_written(t)};
  auto w = start(g, "all_reduce", ticket, [&](c10d::Backend& b) { return b.allreduce(ts, o); });
  Pending::Step then;
  if (op == ReduceOp::Mean && !native_avg(g)) {
    int world = g.size();
    then = [t, world](Pending&, Clock::time_point) mutable { divide_by_world(t, world); };
  }
  return make(g, "all_reduce", ticket, w, mem, std::move(then));
}
}  // namespace

SoloSection::SoloSection(std::string what) : what_(std::move(what)), outer_(t_solo) { t_solo = this; }
SoloSection::~SoloSection() { t_solo = outer_; }

PendingPtr barrier(Group& g) {
  verify_same_call(g, {kBarrier});
  return start_barrier(g, record(g, "barrier", nullptr, nullptr));
}

void barrier_blocking(Group& g) {
  DirectCollectives* direct = g.direct_for("barrier");
  if (!direct || g.detail_checks()) return barrier(g)->wait();
  auto ticket = record(g, "barrier", nullptr, nullptr);
  run_direct(g, "barrier", ticket, *direct, [&](DirectCollectives& d) { return d.barrier_now(); },
             [&] { return start_barrier(g, ticket); });
}

PendingPtr broadcast(Group& g, const at::Tensor& t, int src) {
  check_tensor(g, t, "broadcast");
  check_root(g, src, "broadcast", "src");
  verify_same_call(g, {kBroadcast, -1, src, &t});
  return start_broadcast(g, t, src, record(g, "broadcast", nullptr, &t, src));
}

void broadcast_blocking(Group& g, const at::Tensor& t, int src) {
  DirectCollectives* direct = g.direct_for("broadcast");
  if (!direct || g.detail_checks()) return broadcast(g, t, src)->wait();
  check_tensor(g, t, "broadcast");
  check_root(g, src, "broadcast", "src");
  auto ticket = record(g, "broadcast", nullptr, &t, src);
  run_direct(g, "broadcast", ticket, *direct, [&](DirectCollectives& d) { return d.broadcast_now(t, src); },
             [&] { return start_broadcast(g, t, src, ticket); });
}

PendingPtr broadcast_bytes(Group& g, const void* data, size_t len, int src) {
  check_root(g, src, "broadcast_bytes", "src");
  bool is_src = g.rank() == src;
  check_arg(!is_src || data || len == 0, "broadcast_bytes: data is NULL on src with len > 0");
  verify_same_call(g, {kBroadcastBytes, -1, src});
  // A src that cannot send (a len no tensor holds, or no memory for its
  // copy) still takes part in the length's broadcast, with a negative
  // length that says why: the peers then fail at once, as it does, where
  // they waited out the timeout for a length that never came; and every
  // rank made the same one collective, so the group stays usable.
  constexpr int64_t kLenRefused = -1, kNoMemory = -2;
  constexpr int64_t kAgreedAbove = int64_t{1} << 20;
  int64_t sent = 0;
  std::optional<Error> src_failure;
  at::Tensor payload;
  if (is_src) {
    if (len > static_cast<size_t>(INT64_MAX)) {
      sent = kLenRefused;
      src_failure = Error(Status::InvalidArgument, "broadcast_bytes: len " + std::to_string(len) +
                                                       " exceeds the largest payload (2^63 - 1 bytes)");
    } else {
      try {
        payload = at::empty({static_cast<int64_t>(len)}, at::TensorOptions().dtype(at::kByte));
        sent = static_cast<int64_t>(len);
        if (len) std::memcpy(payload.data_ptr(), data, len);
      } catch (const std::exception& e) {
        sent = kNoMemory;
        src_failure = Error(Status::NoMemory, "broadcast_bytes: no memory for a copy of the " + std::to_string(len) +
                                                  " bytes to send: " + short_what(e));
      }
    }
  }
  auto cpu = at::TensorOptions().dtype(at::kLong);
  at::Tensor length = at::full({1}, sent, cpu);
  auto to_dev = [&g](const at::Tensor& t) {
    return g.device().type == DeviceType::CUDA ? t.to(at::Device(at::kCUDA, g.device().index)) : t;
  };
  at::Tensor dev_length = to_dev(length);
  std::vector<at::Tensor> ts{dev_length};
  c10d::BroadcastOptions o;
  o.rootRank = src;
  auto ticket = record(g, "broadcast_bytes", nullptr, nullptr, src);
  auto w = start(g, "broadcast_bytes", ticket, [&](c10d::Backend& b) { return b.broadcast(ts, o); });
  return make(g, "broadcast_bytes", ticket, w, [=](Pending& p, Clock::time_point deadline) mutable {
    int64_t n = dev_length.cpu().item<int64_t>();
    if (src_failure) throw *src_failure;
    if (n == kLenRefused || n == kNoMemory)
      fail(n == kNoMemory ? Status::NoMemory : Status::InvalidArgument,
           "broadcast_bytes: src rank " + std::to_string(src) + " could not send its bytes (" +
               (n == kNoMemory ? "no memory for their copy" : "its len exceeds 2^63 - 1") + "; its own error says more)");
    if (n < 0) fail(Status::Internal, "broadcast_bytes: received a negative length");
    std::optional<Error> no_memory;
    if (!payload.defined()) {
      try {
        payload = at::empty({n}, at::TensorOptions().dtype(at::kByte));
      } catch (const std::exception& e) {
        no_memory = Error(Status::NoMemory, "broadcast_bytes: no memory for the " + std::to_string(n) +
                                                " bytes src rank " + std::to_string(src) + " sends: " + short_what(e));
      }
    }
    // Above kAgreedAbove the ranks agree that each has room before the
    // payload moves (one more all-reduce of 8 bytes, small beside the
    // payload): a peer without memory then fails every rank at once, where
    // src and the other peers would wait in the payload's broadcast until
    // their timeout. Below it a peer has no memory for a megabyte, which no
    // call of ours survives anyway; it fails alone.
    if (n > kAgreedAbove) {
      at::Tensor lacking = to_dev(at::full({1}, no_memory ? int64_t{p.group().rank()} + 1 : 0, cpu));
      std::vector<at::Tensor> lts{lacking};
      c10d::AllreduceOptions max;
      max.reduceOp = c10d::ReduceOp::MAX;
      auto w3 = start(p.group(), "broadcast_bytes", 0, [&](c10d::Backend& b) { return b.allreduce(lts, max); });
      p.wait_work(w3, deadline);
      const int64_t lacking_rank = lacking.cpu().item<int64_t>() - 1;
      if (!no_memory && lacking_rank >= 0)  // a rank without memory says so in its own words, below
        fail(Status::NoMemory, "broadcast_bytes: rank " + std::to_string(lacking_rank) + " has no memory for the " +
                                   std::to_string(n) + " bytes src rank " + std::to_string(src) +
                                   " sends; no rank received them");
    }
    if (no_memory) throw *no_memory;
    at::Tensor dev_payload = to_dev(payload);
    if (n > 0) {
      std::vector<at::Tensor> pts{dev_payload};
      auto w2 = start(p.group(), "broadcast_bytes", 0, [&](c10d::Backend& b) { return b.broadcast(pts, o); });
      p.wait_work(w2, deadline);
    }
    at::Tensor host = dev_payload.cpu();
    auto* bytes = static_cast<const uint8_t*>(host.data_ptr());
    p.bytes.assign(bytes, bytes + n);
  });
}

PendingPtr all_reduce(Group& g, const at::Tensor& t, ReduceOp op) {
  check_tensor(g, t, "all_reduce");
  verify_same_call(g, {kAllReduce, static_cast<int64_t>(op), -1, &t});
  return start_all_reduce(g, t, op, record(g, "all_reduce", op_name(static_cast<int64_t>(op)), &t));
}

void all_reduce_blocking(Group& g, const at::Tensor& t, ReduceOp op) {
  DirectCollectives* direct = g.direct_for("all_reduce");
  if (!direct || g.detail_checks()) return all_reduce(g, t, op)->wait();
  check_tensor(g, t, "all_reduce");
  const bool avg = native_avg(g);
  const c10d::ReduceOp c10d_op = to_c10d(op, avg);
  auto ticket = record(g, "all_reduce", op_name(static_cast<int64_t>(op)), &t);
  const bool direct_done =
      run_direct(g, "all_reduce", ticket, *direct, [&](DirectCollectives& d) { return d.all_reduce_now(t, c10d_op); },
                 [&] { return start_all_reduce(g, t, op, ticket); });
  // The c10d path's Pending divided already.
  if (direct_done && op == ReduceOp::Mean && !avg) divide_by_world(t, g.size());
}

PendingPtr divide_then_sum(Group& g, const at::Tensor& t, int64_t divisor) {
  t.div_(divisor);
  return all_reduce(g, t, ReduceOp::Sum);
}

bool takes_parts(Group& g, at::ScalarType type) {
  if (g.detail_checks()) return false;  // its check would compare one tensor, which there is not
  DirectCollectives* direct = g.direct_for("all_reduce");
  return direct && direct->takes_parts(type);
}

PendingPtr all_reduce_parts(Group& g, std::vector<at::Tensor> parts, double scale) {
  check_arg(!parts.empty(), "all_reduce_parts: no parts");
  const at::ScalarType type = parts[0].scalar_type();
  int64_t numel = 0;
  for (const auto& p : parts) {
    check_tensor(g, p, "all_reduce_parts");
    check_arg(p.scalar_type() == type, "all_reduce_parts: the parts differ in dtype");
    numel += p.numel();
  }
  check_arg(takes_parts(g, type), "all_reduce_parts: the group's backend (" + g.backend_name() +
                                      ") has no all-reduce over parts of " + c10::toString(type));
  auto ticket = record(g, "all_reduce", "sum", type, numel);
  DirectCollectives& direct = *g.direct_for("all_reduce");
  auto w = start(g, "all_reduce", ticket,
                 [&](c10d::Backend&) { return direct.all_reduce_parts(std::move(parts), scale); });
  return make(g, "all_reduce", ticket, w);
}

at::Tensor shared_bucket(Group& g, at::ScalarType type, int64_t numel) {
  DirectCollectives* direct = g.direct_for("shared bucket");
  if (!direct) return at::Tensor();
  // Made together through the store, like a collective, but past record():
  // refused the same way (a reducer's layout check, a collective, refuses first).
  refuse_inside_solo_section(g, "shared bucket");
  try {
    return direct->shared_bucket(type, numel);
  } catch (const std::exception& e) {
    // Every rank makes it together, through the store: a rank that timed
    // out or lost a peer here leaves the others' making in an unknown
    // state, so the group is broken, as after a collective that failed
    // (its next call is refused at once, not waited out again).
    const Status s = classify_exception(e);
    if (s != Status::Timeout && s != Status::PeerFailed) throw;
    g.throw_if_peer_reported();  // another rank's failure: its root cause, not this rank's echo of it
    g.fail_and_publish(s, "shared bucket on rank " + std::to_string(g.rank()) + ": " + short_what(e));
  }
}

bool offers_shared_buckets(Group& g) {
  DirectCollectives* direct = g.direct_for("shared bucket");
  return direct && direct->offers_shared_buckets();
}

PendingPtr reduce(Group& g, const at::Tensor& t, int dst, ReduceOp op) {
  check_tensor(g, t, "reduce");
  check_root(g, dst, "reduce", "dst");
  verify_same_call(g, {kReduce, static_cast<int64_t>(op), dst, &t});
  auto ticket = record(g, "reduce", op_name(static_cast<int64_t>(op)), &t, dst);
  c10d::ReduceOptions o;
  o.reduceOp = to_c10d(op, native_avg(g));
  o.rootRank = dst;
  CallerMemory mem(g, "reduce", ticket, in_place(g, "reduce", is_caller_memory(t), [&](DirectCollectives& d) {
                     return d.performs_reduce(t, o.reduceOp);
                   }));
  std::vector<at::Tensor> ts{mem.read_written(t)};  // every rank's, as Gloo leaves them
  auto w = start(g, "reduce", ticket, [&](c10d::Backend& b) { return b.reduce(ts, o); });
  Pending::Step then;
  if (op == ReduceOp::Mean && !native_avg(g) && g.rank() == dst) {
    int world = g.size();
    then = [t, world](Pending&, Clock::time_point) mutable { divide_by_world(t, world); };
  }
  return make(g, "reduce", ticket, w, mem, std::move(then));
}

PendingPtr all_gather(Group& g, const at::Tensor& in) {
  check_tensor(g, in, "all_gather");
  verify_same_call(g, {kAllGather, -1, -1, &in});
  auto ticket = record(g, "all_gather", nullptr, &in);
  const at::Tensor out = empty_gathered(g, in);
  CallerMemory mem(g, "all_gather", ticket, in_place(g, "all_gather", is_caller_memory(in), [&](DirectCollectives& d) {
                     return d.performs_all_gather(in, out);
                   }));
  auto p = make(g, "all_gather", ticket, start_gather_work(g, "all_gather", mem.read(in), out, ticket), mem);
  p->tensors = {out};
  return p;
}

namespace {
// A blocking gather of checked `in` into checked `out` through `direct`
// (or the c10d path when the backend wants it), recorded as `op`.
void all_gather_direct(Group& g, const char* op, DirectCollectives& direct, const at::Tensor& in,
                       const at::Tensor& out) {
  auto ticket = record(g, op, nullptr, &in);
  run_direct(g, op, ticket, direct, [&](DirectCollectives& d) { return d.all_gather_now(in, out); },
             [&] { return start_all_gather_into(g, op, in, out, ticket); });
}
}  // namespace

at::Tensor all_gather_blocking(Group& g, const at::Tensor& in) {
  DirectCollectives* direct = g.direct_for("all_gather");
  if (!direct || g.detail_checks()) {
    auto p = all_gather(g, in);
    p->wait();
    return p->tensors.at(0);
  }
  check_tensor(g, in, "all_gather");
  at::Tensor out = empty_gathered(g, in);
  all_gather_direct(g, "all_gather", *direct, in, out);
  return out;
}

PendingPtr all_gather_into(Group& g, const at::Tensor& in, const at::Tensor& out) {
  const char* op = "all_gather_into_tensor";
  check_tensor(g, in, op);
  check_gather_output(g, in, out, op);
  verify_same_call(g, {kAllGather, -1, -1, &in});
  return start_all_gather_into(g, op, in, out, record(g, op, nullptr, &in));
}

void all_gather_into_blocking(Group& g, const at::Tensor& in, const at::Tensor& out) {
  const char* op = "all_gather_into_tensor";
  DirectCollectives* direct = g.direct_for(op);
  if (!direct || g.detail_checks()) return all_gather_into(g, in, out)->wait();
  check_tensor(g, in, op);
  check_gather_output(g, in, out, op);
  all_gather_direct(g, op, *direct, in, out);
}

PendingPtr all_gather_uneven(Group& g, const at::Tensor& in) {
  const char* op = "all_gather_uneven";
  check_tensor(g, in, op);
  verify_same_call(g, {kAllGatherUneven, -1, -1, &in});
  // Step 1: everyone's ndim, dtype and sizes (one small gather). A tensor
  // of too many dimensions is refused after it, on every rank: refused
  // before, on its own rank alone, it left the others in this gather, to
  // be matched with that rank's next call.
  std::vector<int64_t> meta(2 + kMaxGatherDims, -1);
  meta[0] = in.dim();
  meta[1] = static_cast<int64_t>(in.scalar_type());
  for (int64_t d = 0; d < in.dim() && d < kMaxGatherDims; ++d) meta[2 + d] = in.size(d);
  at::Tensor meta_t = at::tensor(meta, at::TensorOptions().dtype(at::kLong)).to(in.device());
  at::Tensor metas;
  auto ticket = record(g, op, nullptr, &in);
  auto w = start_all_gather(g, op, meta_t, metas, ticket);
  return make(g, op, ticket, w, [in, metas, op](Pending& p, Clock::time_point deadline) {
    Group& g = p.group();
    at::Tensor m = metas.cpu();
    auto* mp = m.data_ptr<int64_t>();
    const int64_t width = 2 + kMaxGatherDims;
    int64_t ndim = in.dim();
    std::vector<int64_t> max_size(in.sizes().begin(), in.sizes().end());
    bool all_equal = true;
    for (int r = 0; r < g.size(); ++r)
      check_arg(mp[r * width] <= kMaxGatherDims, std::string(op) + ": rank " + std::to_string(r) + "'s tensor has " +
                                                     std::to_string(mp[r * width]) + " dimensions; at most " +
                                                     std::to_string(kMaxGatherDims));
    for (int r = 0; r < g.size(); ++r) {
      const int64_t* row = mp + r * width;
      check_arg(row[0] == ndim, std::string(op) + ": rank " + std::to_string(r) + " has " +
                                    std::to_string(row[0]) + " dimensions, rank " +
                                    std::to_string(g.rank()) + " has " + std::to_string(ndim) +
                                    " (all ranks need the same ndim)");
      check_arg(row[1] == mp[1], std::string(op) + ": ranks disagree on the dtype");
      for (int64_t d = 0; d < ndim; ++d) {
        if (row[2 + d] != in.size(d)) all_equal = false;
        max_size[d] = std::max(max_size[d], row[2 + d]);
      }
    }
    // Step 2: pad to the per-dimension maximum, gather, trim.
    at::Tensor padded = in;
    if (!all_equal) {
      std::vector<int64_t> pad;  // constant_pad_nd wants (last dim first) pairs
      for (int64_t d = ndim - 1; d >= 0; --d) {
        pad.push_back(0);
        pad.push_back(max_size[d] - in.size(d));
      }
      padded = at::constant_pad_nd(in, pad, 0).contiguous();
    }
    at::Tensor stacked;
    auto w2 = start_all_gather(g, op, padded, stacked);
    p.wait_work(w2, deadline);
    p.tensors.clear();
    for (int r = 0; r < g.size(); ++r) {
      at::Tensor t = stacked.select(0, r);
      const int64_t* row = mp + r * width;
      for (int64_t d = 0; d < ndim && !all_equal; ++d) t = t.narrow(d, 0, row[2 + d]);
      p.tensors.push_back(all_equal ? t : t.contiguous());
    }
  });
}

PendingPtr reduce_boolean_decision(Group& g, bool decision, bool all) {
  at::Tensor t = at::full({1}, decision ? 1 : 0, at::TensorOptions().dtype(at::kLong));
  if (g.device().type == DeviceType::CUDA) t = t.to(at::Device(at::kCUDA, g.device().index));
  std::vector<at::Tensor> ts{t};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp(c10d::ReduceOp::SUM);
  const char* op = "reduce_boolean_decision";
  verify_same_call(g, {kBooleanDecision});
  auto ticket = record(g, op, nullptr, nullptr);
  auto w = start(g, op, ticket, [&](c10d::Backend& b) { return b.allreduce(ts, o); });
  int world = g.size();
  return make(g, op, ticket, w, [t, all, world](Pending& p, Clock::time_point) {
    int64_t sum = t.cpu().item<int64_t>();
    p.decision = all ? sum == world : sum > 0;
  });
}

}  // namespace ddp::core