#include "ddp/launch.h"

#include "common/error.h"
#include "handles.h"
#include "launch/spawn.h"

using namespace ddp::capi;

struct ddp_worker {
  ddp::core::launch::WorkerContext* ctx;
};

extern "C" {

ddp_status ddp_spawn_options_init(ddp_spawn_options* opts, unsigned int version) {
  return init_options(opts, version, DDP_SPAWN_OPTIONS_VERSION, ddp_spawn_options DDP_SPAWN_OPTIONS_INIT, "ddp_spawn_options_init");
}

ddp_status ddp_spawn(const ddp_spawn_options* opts, ddp_worker_fn fn, const void* arg, size_t arg_len,
                     ddp_buffer** rank0_result) {
  if (rank0_result) *rank0_result = nullptr;
  if (!fn) return invalid("ddp_spawn: fn is NULL");
  return fence([&] {
    ddp::core::launch::SpawnOptions o;
    if (opts) {
      ddp::core::check_arg(opts->version == DDP_SPAWN_OPTIONS_VERSION,
                     "ddp_spawn: unknown options version " + std::to_string(opts->version));
      ddp::core::check_arg(opts->start_method == DDP_START_POPEN || opts->start_method == DDP_START_FORK,
                     "ddp_spawn: unknown start method " + std::to_string(opts->start_method));
      ddp::core::check_arg(opts->timeout_ms >= 0 && opts->grace_ms >= 0, "ddp_spawn: negative timeout");
      o.nprocs = opts->nprocs;
      o.method = opts->start_method == DDP_START_FORK ? ddp::core::launch::StartMethod::Fork
                                                      : ddp::core::launch::StartMethod::Popen;
      if (opts->master_addr) o.master_addr = opts->master_addr;
      o.master_port = opts->master_port;
      o.timeout = ddp::core::Millis(opts->timeout_ms);
      if (opts->grace_ms > 0) o.grace = ddp::core::Millis(opts->grace_ms);
    }
    auto body = [fn](ddp::core::launch::WorkerContext& ctx, const std::vector<uint8_t>& a) {
      ddp_worker w{&ctx};
      return fn(&w, a.empty() ? nullptr : a.data(), a.size());
    };
    auto outcome = ddp::core::launch::spawn(o, body, arg, arg_len);
    if (rank0_result && outcome.rank0_result) {
      auto h = std::make_unique<ddp_buffer>();
      h->bytes = std::move(*outcome.rank0_result);
      hand_out(rank0_result, std::move(h));
    }
  });
}

int ddp_worker_rank(const ddp_worker* w) { return w ? w->ctx->rank : -1; }
int ddp_worker_world_size(const ddp_worker* w) { return w ? w->ctx->world_size : -1; }
int ddp_worker_local_rank(const ddp_worker* w) { return w ? w->ctx->local_rank : -1; }

ddp_status ddp_worker_set_result(ddp_worker* w, const void* data, size_t len) {
  if (!w) return invalid("ddp_worker_set_result: worker is NULL");
  if (!data && len) return invalid("ddp_worker_set_result: data is NULL with len > 0");
  return fence([&] {
    auto* p = static_cast<const uint8_t*>(data);
    w->ctx->result.assign(p, p + len);
    w->ctx->has_result = true;
  });
}

}  // extern "C"
