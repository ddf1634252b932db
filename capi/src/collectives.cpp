// The collectives: argument checks, handle mapping, then the core.
#include "ddp/collectives.h"

#include "common/error.h"
#include "handles.h"

using namespace ddp::capi;

namespace {


ddp::core::Group& group_of(ddp_group* g) { return *require(g, "group")->group; }
const at::Tensor& tensor_of(const ddp_tensor* t) { return require(t, "tensor")->t; }

// Runs `start` and hands the pending operation out as a ddp_work, which
// keeps the group alive until it is freed.
template <typename Start>
ddp_status start_async(ddp_work** out, const char* fn, ddp_group* g, Start&& start) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_work>();
    h->group = require(g, "group")->group;
    h->pending = start();
    hand_out(out, std::move(h));
  });
}

// Blocking form: start, wait with the group's timeout, then `collect`.
template <typename Start, typename Collect>
ddp_status run_blocking(Start&& start, Collect&& collect) {
  return fence([&] {
    ddp::core::PendingPtr p = start();
    p->wait();
    collect(*p);
  });
}
template <typename Start>
ddp_status run_blocking(Start&& start) {
  return run_blocking(std::forward<Start>(start), [](ddp::core::Pending&) {});
}

// The waited work behind `w`; `fn` and `result` name the call and what it
// reads, and `kind` (if given) is the only operation whose result that is.
ddp::core::Pending& waited(ddp_work* w, const char* fn, const char* kind = nullptr) {
  auto* h = require(w, "work");
  if (kind && h->pending->op() != kind)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": the work came from " + h->pending->op() +
                                          "; only a work from " + kind + " has this result");
  if (!h->pending->done()) fail(DDP_E_STATE, std::string(fn) + ": the work has not been waited for yet");
  return *h->pending;
}

}  // namespace

extern "C" {

ddp_status ddp_work_wait(ddp_work* w, int64_t timeout_ms) {
  return fence([&] {
    auto* h = require(w, "work");
    std::optional<ddp::core::Millis> t;
    if (timeout_ms >= 0) t = ddp::core::Millis(timeout_ms);
    h->pending->wait(t);
  });
}

ddp_status ddp_work_is_completed(ddp_work* w, int* out) {
  if (!out) return invalid("ddp_work_is_completed: out is NULL");
  *out = 0;
  return fence([&] { *out = require(w, "work")->pending->test() ? 1 : 0; });
}

size_t ddp_work_result_count(const ddp_work* w) {
  auto* h = live(w); return h && h->pending->done() ? h->pending->tensors.size() : 0;
}

ddp_status ddp_work_result_tensor(ddp_work* w, size_t index, ddp_tensor** out) {
  if (!out) return invalid("ddp_work_result_tensor: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto& p = waited(w, "ddp_work_result_tensor");
    ddp::core::check_arg(index < p.tensors.size(), "result index " + std::to_string(index) +
                                                 " >= result count " + std::to_string(p.tensors.size()));
    hand_out(out, wrap_tensor(p.tensors[index]));
  });
}

ddp_status ddp_work_result_buffer(ddp_work* w, ddp_buffer** out) {
  if (!out) return invalid("ddp_work_result_buffer: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_buffer>();
    h->bytes = waited(w, "ddp_work_result_buffer", "broadcast_bytes").bytes;
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_work_result_decision(ddp_work* w, int* out) {
  if (!out) return invalid("ddp_work_result_decision: out is NULL");
  *out = 0;
  return fence([&] { *out = waited(w, "ddp_work_result_decision", "reduce_boolean_decision").decision ? 1 : 0; });
}

void ddp_work_free(ddp_work* w) { release(w); }

ddp_status ddp_barrier(ddp_group* g) {
  return fence([&] { ddp::core::barrier_blocking(group_of(g)); });
}
ddp_status ddp_barrier_async(ddp_group* g, ddp_work** out) {
  return start_async(out, "ddp_barrier_async", g, [&] { return ddp::core::barrier(group_of(g)); });
}

ddp_status ddp_broadcast(ddp_group* g, ddp_tensor* t, int src) {
  return fence([&] { ddp::core::broadcast_blocking(group_of(g), tensor_of(t), src); });
}
ddp_status ddp_broadcast_async(ddp_group* g, ddp_tensor* t, int src, ddp_work** out) {
  return start_async(out, "ddp_broadcast_async", g, [&] { return ddp::core::broadcast(group_of(g), tensor_of(t), src); });
}

ddp_status ddp_broadcast_bytes(ddp_group* g, const void* data, size_t len, int src, ddp_buffer** out) {
  if (!out) return invalid("ddp_broadcast_bytes: out is NULL");
  *out = nullptr;
  return run_blocking([&] { return ddp::core::broadcast_bytes(group_of(g), data, len, src); },
                      [&](ddp::core::Pending& p) {
                        auto h = std::make_unique<ddp_buffer>();
                        h->bytes = std::move(p.bytes);
                        hand_out(out, std::move(h));
                      });
}
ddp_status ddp_broadcast_bytes_async(ddp_group* g, const void* data, size_t len, int src,
                                     ddp_work** out) {
  return start_async(out, "ddp_broadcast_bytes_async", g, [&] { return ddp::core::broadcast_bytes(group_of(g), data, len, src); });
}

ddp_status ddp_all_reduce(ddp_group* g, ddp_tensor* t, ddp_reduce_op op) {
  return fence([&] { ddp::core::all_reduce_blocking(group_of(g), tensor_of(t), to_core(op)); });
}
ddp_status ddp_all_reduce_async(ddp_group* g, ddp_tensor* t, ddp_reduce_op op, ddp_work** out) {
  return start_async(out, "ddp_all_reduce_async", g, [&] { return ddp::core::all_reduce(group_of(g), tensor_of(t), to_core(op)); });
}

ddp_status ddp_reduce(ddp_group* g, ddp_tensor* t, int dst, ddp_reduce_op op) {
  return run_blocking([&] { return ddp::core::reduce(group_of(g), tensor_of(t), dst, to_core(op)); });
}
ddp_status ddp_reduce_async(ddp_group* g, ddp_tensor* t, int dst, ddp_reduce_op op, ddp_work** out) {
  return start_async(out, "ddp_reduce_async", g, [&] { return ddp::core::reduce(group_of(g), tensor_of(t), dst, to_core(op)); });
}

ddp_status ddp_all_gather(ddp_group* g, const ddp_tensor* in, ddp_tensor** out) {
  if (!out) return invalid("ddp_all_gather: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(ddp::core::all_gather_blocking(group_of(g), tensor_of(in)))); });
}
ddp_status ddp_all_gather_async(ddp_group* g, const ddp_tensor* in, ddp_work** out) {
  return start_async(out, "ddp_all_gather_async", g, [&] { return ddp::core::all_gather(group_of(g), tensor_of(in)); });
}

ddp_status ddp_all_gather_into_tensor(ddp_group* g, const ddp_tensor* in, ddp_tensor* out) {
  return fence([&] { ddp::core::all_gather_into_blocking(group_of(g), tensor_of(in), require(out, "out")->t); });
}
ddp_status ddp_all_gather_into_tensor_async(ddp_group* g, const ddp_tensor* in, ddp_tensor* out, ddp_work** work) {
  return start_async(work, "ddp_all_gather_into_tensor_async", g, [&] {
    return ddp::core::all_gather_into(group_of(g), tensor_of(in), require(out, "out")->t);
  });
}

ddp_status ddp_all_gather_uneven(ddp_group* g, const ddp_tensor* in, ddp_tensor** out) {
  if (!out) return invalid("ddp_all_gather_uneven: out is NULL");
  int n = ddp_group_size(g);
  for (int i = 0; i < n; ++i) out[i] = nullptr;
  return run_blocking([&] { return ddp::core::all_gather_uneven(group_of(g), tensor_of(in)); },
                      [&](ddp::core::Pending& p) {
                        std::vector<std::unique_ptr<ddp_tensor>> made;
                        for (auto& t : p.tensors) made.push_back(wrap_tensor(t));
                        for (size_t i = 0; i < made.size(); ++i) hand_out(&out[i], std::move(made[i]));
                      });
}
ddp_status ddp_all_gather_uneven_async(ddp_group* g, const ddp_tensor* in, ddp_work** out) {
  return start_async(out, "ddp_all_gather_uneven_async", g, [&] { return ddp::core::all_gather_uneven(group_of(g), tensor_of(in)); });
}

ddp_status ddp_reduce_boolean_decision(ddp_group* g, int decision, int all, int* out) {
  if (!out) return invalid("ddp_reduce_boolean_decision: out is NULL");
  *out = 0;
  return run_blocking([&] { return ddp::core::reduce_boolean_decision(group_of(g), decision != 0, all != 0); },
                      [&](ddp::core::Pending& p) { *out = p.decision ? 1 : 0; });
}
ddp_status ddp_reduce_boolean_decision_async(ddp_group* g, int decision, int all, ddp_work** out) {
  return start_async(out, "ddp_reduce_boolean_decision_async", g, [&] {
    return ddp::core::reduce_boolean_decision(group_of(g), decision != 0, all != 0);
  });
}

}  // extern "C"
