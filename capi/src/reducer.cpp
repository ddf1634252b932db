#include "ddp/reducer.h"

#include <cstddef>
#include <cstring>

#include "common/error.h"
#include "reducer/autograd_hooks.h"
#include "reducer/grad_reducer.h"
#include "handles.h"

using namespace ddp::capi;


ddp_reducer::~ddp_reducer() = default;

extern "C" {

namespace {
// Version 1 of ddp_reducer_options ended where static_graph begins.
constexpr size_t kReducerOptionsV1Bytes = offsetof(ddp_reducer_options, static_graph);
}  // namespace

ddp_status ddp_reducer_options_init(ddp_reducer_options* opts, unsigned int version) {
  if (opts && version == 1) {
    ddp_reducer_options d = DDP_REDUCER_OPTIONS_INIT;
    d.version = 1;
    std::memcpy(opts, &d, kReducerOptionsV1Bytes);
    return DDP_OK;
  }
  return init_options(opts, version, DDP_REDUCER_OPTIONS_VERSION, ddp_reducer_options DDP_REDUCER_OPTIONS_INIT, "ddp_reducer_options_init");
}

ddp_status ddp_reducer_new(ddp_reducer** out, ddp_group* group, ddp_tensor* const* params,
                           ddp_tensor* const* grads, size_t n, const ddp_reducer_options* opts) {
  if (!out) return invalid("ddp_reducer_new: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* g = require(group, "group");
    ddp::core::ReducerOptions o;
    bool autograd = false;  // LibTorch leaves, driven by autograd (reducer/autograd_hooks.h)
    if (opts) {
      ddp::core::check_arg(opts->version == 1 || opts->version == DDP_REDUCER_OPTIONS_VERSION,
                     "ddp_reducer_new: unknown options version " + std::to_string(opts->version));
      // A version 1 caller has only that much struct: its later fields keep their defaults.
      ddp_reducer_options in = DDP_REDUCER_OPTIONS_INIT;
      std::memcpy(&in, opts, opts->version == 1 ? kReducerOptionsV1Bytes : sizeof in);
      o.static_graph = in.static_graph != 0;
      o.bucket_cap_mb = in.bucket_cap_mb;
      o.first_bucket_mb = in.first_bucket_mb;
      o.find_unused_parameters = in.find_unused_parameters != 0;
      o.gradient_as_bucket_view = in.gradient_as_bucket_view != 0;
      o.broadcast_parameters = in.broadcast_parameters != 0;
      autograd = in.autograd_hooks != 0;
      o.join_enabled = in.join_enabled != 0;
    }
    ddp::core::check_arg(!autograd || (params && !grads),
                   "ddp_reducer_new: autograd_hooks takes params (LibTorch leaves) and grads = NULL");
    ddp::core::check_arg(grads != nullptr || autograd || (o.gradient_as_bucket_view && params),
                   "ddp_reducer_new: grads is NULL");
    ddp::core::check_arg(params != nullptr || !o.broadcast_parameters,
                   "ddp_reducer_new: params is NULL but broadcast_parameters is on");
    std::vector<at::Tensor> p, gr(n);
    for (size_t i = 0; i < n; ++i) {
      if (params) p.push_back(require(params[i], ("params[" + std::to_string(i) + "]").c_str())->t);
      if (grads && (grads[i] || !o.gradient_as_bucket_view))
        gr[i] = require(grads[i], ("grads[" + std::to_string(i) + "]").c_str())->t;
    }
    auto h = std::make_unique<ddp_reducer>();
    h->group = g->group;
    h->reducer = autograd ? ddp::core::make_autograd_reducer(*h->group, std::move(p), o)
                          : std::make_unique<ddp::core::Reducer>(*h->group, std::move(p), std::move(gr), o);
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_reducer_mark_ready(ddp_reducer* r, size_t index) {
  return fence([&] { require(r, "reducer")->reducer->mark_ready(index); });
}

ddp_status ddp_reducer_finish(ddp_reducer* r) {
  return fence([&] { require(r, "reducer")->reducer->finish(); });
}

ddp_status ddp_reducer_set_sync(ddp_reducer* r, int enabled) {
  return fence([&] { require(r, "reducer")->reducer->set_sync(enabled != 0); });
}

ddp_status ddp_reducer_join(ddp_reducer* r) {
  return fence([&] { require(r, "reducer")->reducer->join(); });
}

ddp_status ddp_reducer_set_comm_hook(ddp_reducer* r, const ddp_comm_hook* hook) {
  return fence([&] {
    auto* red = require(r, "reducer");
    red->reducer->set_comm_hook(hook ? require(hook, "hook")->hook : nullptr);
  });
}



size_t ddp_reducer_bucket_count(const ddp_reducer* r) { auto* h = live(r); return h ? h->reducer->bucket_count() : 0; }

ddp_status ddp_reducer_bucket_indices(const ddp_reducer* r, size_t bucket, size_t* out, size_t cap,
                                      size_t* count) {
  return fence([&] {
    const auto& idx = require(r, "reducer")->reducer->bucket_indices(bucket);
    ddp::core::check_arg(out || cap == 0, "ddp_reducer_bucket_indices: out is NULL with cap > 0");
    for (size_t k = 0; k < idx.size() && k < cap; ++k) out[k] = idx[k];
    if (count) *count = idx.size();
  });
}

ddp_status ddp_reducer_gradient(const ddp_reducer* r, size_t index, ddp_tensor** out) {
  if (!out) return invalid("ddp_reducer_gradient: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(require(r, "reducer")->reducer->gradient(index))); });
}

void ddp_reducer_free(ddp_reducer* r) {
  // From inside its own comm hook the reducer is in use by the call that
  // runs the hook.
  release_unless_in_use(
      r, [](const ddp_reducer& h) { return h.reducer && h.reducer->hook_running(); },
      "ddp_reducer_free: called from the reducer's own comm hook; the reducer is in use until the hook returns, and "
      "is not freed (free it after the call that ran the hook)");
}

}  // extern "C"
