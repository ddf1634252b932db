// The strategy: option checks and handle mapping, then core/strategy.
#include "ddp/strategy.h"

#include <cstddef>
#include <cstring>

#include "handles.h"
#include "hooks/comm_hook.h"
#include "model/optimizer.h"
#include "model/script_module.h"
#include "strategy/ddp_strategy.h"

using namespace ddp::capi;

ddp_strategy::~ddp_strategy() { release(group); }

namespace {

// Version 1 of ddp_strategy_options ended where gradient_as_bucket_view
// begins: a caller built against it has only that much memory there.
constexpr size_t kOptionsV1Bytes = offsetof(ddp_strategy_options, gradient_as_bucket_view);

ddp::core::StrategyOptions options_of(const ddp_strategy_options* opts) {
  ddp::core::StrategyOptions o;
  ddp_strategy_options in = DDP_STRATEGY_OPTIONS_INIT;  // a version 1 caller's later fields keep their defaults
  if (opts && opts->version == 1) std::memcpy(&in, opts, kOptionsV1Bytes);
  else if (opts) in = *opts;
  if (in.version != 1 && in.version != DDP_STRATEGY_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_strategy_new: unknown options version " + std::to_string(in.version));
  ddp::core::check_arg(in.kind == DDP_STRATEGY_DDP || in.kind == DDP_STRATEGY_DDP_SPAWN || in.kind == DDP_STRATEGY_DDP_FORK,
                       "ddp_strategy_new: unknown kind " + std::to_string(static_cast<int>(in.kind)));
  ddp::core::check_arg(in.accelerator == DDP_DEVICE_CPU || in.accelerator == DDP_DEVICE_CUDA,
                       "ddp_strategy_new: unknown accelerator " + std::to_string(static_cast<int>(in.accelerator)));
  ddp::core::check_arg(in.timeout_ms >= 0, "ddp_strategy_new: timeout_ms " + std::to_string(in.timeout_ms) + " is negative");
  if (in.sync_batchnorm)
    fail(DDP_E_UNSUPPORTED, "ddp_strategy_new: sync_batchnorm cannot be honoured: a TorchScript module's batch norms "
                            "cannot be converted to synchronised ones");
  if (in.static_graph) fail(DDP_E_UNSUPPORTED, "ddp_strategy_new: static_graph is not supported");
  ddp::core::check_arg(in.devices >= 1, "ddp_strategy_new: devices " + std::to_string(in.devices) + " must be at least 1");
  o.accelerator = static_cast<ddp::core::DeviceType>(in.accelerator);
  o.devices = in.devices;
  o.launch_local_ranks = in.kind == DDP_STRATEGY_DDP;
  if (in.backend) o.backend = in.backend;
  if (in.timeout_ms > 0) o.timeout = ddp::core::Millis(in.timeout_ms);
  o.ddp.bucket_cap_mb = in.bucket_cap_mb;
  o.ddp.first_bucket_mb = in.first_bucket_mb;
  o.ddp.find_unused_parameters = in.find_unused_parameters != 0;
  o.ddp.gradient_as_bucket_view = in.gradient_as_bucket_view != 0;
  o.broadcast_buffers = in.broadcast_buffers != 0;
  o.model_averaging_period = in.model_averaging_period;
  o.model_averaging_warmup = in.model_averaging_warmup;
  if (in.comm_hook) {
    const auto* hook = require(in.comm_hook, "comm_hook");
    o.comm_hook = hook->hook;
    // Lightning's rule: post-local SGD needs the averager, which starts
    // where the hook stops all-reducing gradients.
    if (hook->post_localsgd_start >= 0) {
      ddp::core::check_arg(in.model_averaging_period > 0,
                           "ddp_strategy_new: model_averaging_period is required with the post-local SGD hook");
      if (in.model_averaging_warmup == 0) o.model_averaging_warmup = hook->post_localsgd_start;
    }
  }
  return o;
}

ddp::core::DdpStrategy& strategy_of(ddp_strategy* s) { return *require(s, "strategy")->strategy; }

// The strategy's group handle for the collectives of collectives.h.
ddp_status group_for(ddp_strategy* s, const char* fn, ddp_group** g) {
  return fence([&] {
    *g = require(s, "strategy")->group;
    if (!*g) fail(DDP_E_STATE, std::string(fn) + ": before ddp_strategy_setup_environment");
  });
}

}  // namespace

extern "C" {

ddp_status ddp_strategy_options_init(ddp_strategy_options* opts, unsigned int version) {
  if (opts && version == 1) {
    ddp_strategy_options d = DDP_STRATEGY_OPTIONS_INIT;
    d.version = 1;
    std::memcpy(opts, &d, kOptionsV1Bytes);
    return DDP_OK;
  }
  return init_options(opts, version, DDP_STRATEGY_OPTIONS_VERSION, ddp_strategy_options DDP_STRATEGY_OPTIONS_INIT, "ddp_strategy_options_init");
}

ddp_status ddp_strategy_new(ddp_strategy** out, const ddp_strategy_options* opts) {
  if (!out) return invalid("ddp_strategy_new: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_strategy>();
    h->strategy = std::make_unique<ddp::core::DdpStrategy>(options_of(opts));
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_strategy_setup_environment(ddp_strategy* s) {
  return fence([&] {
    auto* h = require(s, "strategy");
    h->strategy->setup_environment();
    auto g = std::make_unique<ddp_group>();
    g->group = h->strategy->group();
    hand_out(&h->group, std::move(g));
  });
}

ddp_group* ddp_strategy_group(ddp_strategy* s) {
  auto* h = live(s);
  return h ? h->group : nullptr;
}

int ddp_strategy_global_rank(const ddp_strategy* s) { auto* h = live(s); return h ? h->strategy->global_rank() : -1; }
int ddp_strategy_local_rank(const ddp_strategy* s) { auto* h = live(s); return h ? h->strategy->local_rank() : -1; }
int ddp_strategy_node_rank(const ddp_strategy* s) { auto* h = live(s); return h ? h->strategy->node_rank() : -1; }
int ddp_strategy_world_size(const ddp_strategy* s) { auto* h = live(s); return h ? h->strategy->world_size() : -1; }
int ddp_strategy_is_global_zero(const ddp_strategy* s) {
  auto* h = live(s);
  return h && h->strategy->is_global_zero() ? 1 : 0;
}
ddp_device ddp_strategy_root_device(const ddp_strategy* s) {
  auto* h = live(s);
  return h ? to_c(h->strategy->root_device()) : ddp_device DDP_DEVICE_CPU_INIT;
}

ddp_status ddp_strategy_setup_module(ddp_strategy* s, ddp_module* m) {
  return fence([&] { strategy_of(s).setup_module(*require(m, "module")->module); });
}

ddp_status ddp_strategy_forward(ddp_strategy* s, ddp_module* m, const ddp_tensor* input, ddp_tensor** out) {
  if (!out) return invalid("ddp_strategy_forward: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto& st = strategy_of(s);
    auto* mod = require(m, "module");
    hand_out(out, wrap_tensor(st.forward(*mod->module, require(input, "input")->t)));
  });
}

ddp_status ddp_strategy_backward(ddp_strategy* s, const ddp_tensor* loss) {
  return fence([&] { strategy_of(s).backward(require(loss, "loss")->t); });
}

ddp_status ddp_strategy_optimizer_step(ddp_strategy* s, ddp_optimizer* opt) {
  return fence([&] { strategy_of(s).optimizer_step(*require(opt, "optimizer")->optimizer); });
}

ddp_status ddp_strategy_block_backward_sync(ddp_strategy* s, int on) {
  return fence([&] { strategy_of(s).block_backward_sync(on != 0); });
}

ddp_status ddp_strategy_barrier(ddp_strategy* s, const char* name) {
  return fence([&] { strategy_of(s).barrier(name ? name : ""); });
}

ddp_status ddp_strategy_reduce(ddp_strategy* s, ddp_tensor* t, ddp_reduce_op op) {
  return fence([&] { strategy_of(s).reduce(require(t, "tensor")->t, to_core(op)); });
}

ddp_status ddp_strategy_broadcast_bytes(ddp_strategy* s, const void* data, size_t len, int src, ddp_buffer** out) {
  ddp_group* g = nullptr;
  ddp_status st = group_for(s, "ddp_strategy_broadcast_bytes", &g);
  return st != DDP_OK ? st : ddp_broadcast_bytes(g, data, len, src, out);
}

ddp_status ddp_strategy_all_gather(ddp_strategy* s, const ddp_tensor* in, ddp_tensor** out) {
  ddp_group* g = nullptr;
  ddp_status st = group_for(s, "ddp_strategy_all_gather", &g);
  return st != DDP_OK ? st : ddp_all_gather(g, in, out);
}

ddp_status ddp_strategy_all_gather_uneven(ddp_strategy* s, const ddp_tensor* in, ddp_tensor** out) {
  ddp_group* g = nullptr;
  ddp_status st = group_for(s, "ddp_strategy_all_gather_uneven", &g);
  return st != DDP_OK ? st : ddp_all_gather_uneven(g, in, out);
}

ddp_status ddp_strategy_reduce_boolean_decision(ddp_strategy* s, int decision, int all, int* out) {
  ddp_group* g = nullptr;
  ddp_status st = group_for(s, "ddp_strategy_reduce_boolean_decision", &g);
  return st != DDP_OK ? st : ddp_reduce_boolean_decision(g, decision, all, out);
}

ddp_status ddp_strategy_save_checkpoint(ddp_strategy* s, const char* path, const ddp_module* m, const ddp_optimizer* opt,
                                        int64_t step, int64_t epoch, const void* user, size_t user_len) {
  if (!path) return invalid("ddp_strategy_save_checkpoint: path is NULL");
  if (!user && user_len > 0) return invalid("ddp_strategy_save_checkpoint: user is NULL with user_len > 0");
  return fence([&] {
    auto& st = strategy_of(s);
    const auto* mod = require(m, "module");
    const ddp::core::Optimizer* o = opt ? require(opt, "optimizer")->optimizer.get() : nullptr;
    auto* bytes = static_cast<const uint8_t*>(user);
    st.save_checkpoint(path, *mod->module, o, step, epoch, std::vector<uint8_t>(bytes, bytes + user_len));
  });
}

ddp_status ddp_strategy_load_checkpoint(ddp_strategy* s, const char* path, ddp_module* m, ddp_optimizer* opt,
                                        int64_t* step, int64_t* epoch, ddp_buffer** user) {
  if (user) *user = nullptr;
  if (!path) return invalid("ddp_strategy_load_checkpoint: path is NULL");
  return fence([&] {
    auto& st = strategy_of(s);
    auto* mod = require(m, "module");
    ddp::core::Optimizer* o = opt ? require(opt, "optimizer")->optimizer.get() : nullptr;
    ddp::core::Checkpoint c = st.load_checkpoint(path, *mod->module, o);
    if (step) *step = c.step;
    if (epoch) *epoch = c.epoch;
    if (user) {
      auto b = std::make_unique<ddp_buffer>();
      b->bytes = std::move(c.user);
      hand_out(user, std::move(b));
    }
  });
}

ddp_status ddp_strategy_teardown(ddp_strategy* s) {
  return fence([&] {
    auto* h = require(s, "strategy");
    release(h->group);
    h->group = nullptr;
    h->strategy->teardown();
  });
}

void ddp_strategy_free(ddp_strategy* s) { release(s); }

}  // extern "C"
