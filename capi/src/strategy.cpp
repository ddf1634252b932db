// The strategy: option checks and handle mapping, then core/strategy.
#include "ddp/strategy.h"

#include <csignal>
#include <cstddef>
#include <limits>
#include <cstring>

#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "handles.h"
#include "hooks/comm_hook.h"
#include "model/lr_scheduler.h"
#include "model/optimizer.h"
#include "model/script_module.h"
#include "strategy/ddp_strategy.h"

using namespace ddp::capi;

ddp_strategy::~ddp_strategy() { release(group); }

namespace {

// Each earlier version of ddp_strategy_options ended where the next one's
// first field begins: a caller built against it has only that much memory.
constexpr size_t kOptionsV1Bytes = offsetof(ddp_strategy_options, gradient_as_bucket_view);
constexpr size_t kOptionsV2Bytes = offsetof(ddp_strategy_options, precision);
constexpr size_t kOptionsV3Bytes = offsetof(ddp_strategy_options, state_dict_prefix);
constexpr size_t kOptionsV4Bytes = offsetof(ddp_strategy_options, requeue_signal);

size_t options_bytes(unsigned int version) {
  return version == 1   ? kOptionsV1Bytes
         : version == 2 ? kOptionsV2Bytes
         : version == 3 ? kOptionsV3Bytes
         : version == 4 ? kOptionsV4Bytes
                        : sizeof(ddp_strategy_options);
}

// The callbacks of ddp_cluster_callbacks, each called once; a failure or a
// missing callback is named.
ddp::core::ClusterEnv env_from_callbacks(const ddp_cluster_callbacks& cb) {
  auto value = [&](int (*fn)(void*), const char* name) {
    if (!fn) fail(DDP_E_INVALID_ARGUMENT, std::string("cluster_callbacks: ") + name + " is NULL");
    int v = fn(cb.user_data);
    if (v < 0)
      fail(DDP_E_INVALID_ARGUMENT, std::string("cluster_callbacks: ") + name + " failed (returned " + std::to_string(v) + ")");
    return v;
  };
  ddp::core::ClusterEnv e;
  e.name = "caller";
  e.world_size = value(cb.world_size, "world_size");
  e.rank = value(cb.global_rank, "global_rank");
  e.local_rank = value(cb.local_rank, "local_rank");
  e.local_world_size = value(cb.local_world_size, "local_world_size");
  e.node_rank = value(cb.node_rank, "node_rank");
  if (!cb.main_address) fail(DDP_E_INVALID_ARGUMENT, "cluster_callbacks: main_address is NULL");
  const char* addr = cb.main_address(cb.user_data);
  if (!addr) fail(DDP_E_INVALID_ARGUMENT, "cluster_callbacks: main_address failed (returned NULL)");
  e.master_addr = addr;
  e.master_port = value(cb.main_port, "main_port");
  return e;
}

}  // namespace

// What a checkpoint_io load callback writes into (a public name, so outside
// the anonymous namespace).
struct ddp_byte_sink {
  std::vector<uint8_t> bytes;
};

namespace {

// ddp_checkpoint_io's callbacks as the core's CheckpointIO.
class CallbackCheckpointIO : public ddp::core::CheckpointIO {
 public:
  explicit CallbackCheckpointIO(const ddp_checkpoint_io& io) : io_(io) {}
  void save(const std::vector<uint8_t>& bytes, const std::string& path) override {
    check(io_.save(io_.user_data, path.c_str(), bytes.data(), bytes.size()), "save", path);
  }
  std::vector<uint8_t> load(const std::string& path) override {
    ddp_byte_sink sink;
    // The callback gets a handle that is live during the call only: a sink
    // kept and written to afterwards is refused, not a write into this
    // frame once it is gone.
    struct Lent {
      ddp_byte_sink* token;
      ~Lent() { registry_take(token, Kind::ByteSink); }
    } lent{static_cast<ddp_byte_sink*>(registry_add(&sink, Kind::ByteSink))};
    check(io_.load(io_.user_data, path.c_str(), lent.token), "load", path);
    return std::move(sink.bytes);
  }
  void remove(const std::string& path) override { check(io_.remove(io_.user_data, path.c_str()), "remove", path); }

 private:
  static void check(int rc, const char* what, const std::string& path) {
    if (rc != 0)
      fail(DDP_E_IO, std::string("checkpoint_io: the ") + what + " callback returned " + std::to_string(rc) + " for '" +
                         path + "'");
  }
  ddp_checkpoint_io io_;
};

ddp::core::StrategyOptions options_of(const ddp_strategy_options* opts) {
  ddp::core::StrategyOptions o;
  // An earlier version's later fields keep their defaults, and its devices
  // default was 1 (the caller's INIT wrote it).
  // The version is read first: an unknown one says nothing of the struct's size.
  if (opts && (opts->version < 1 || opts->version > DDP_STRATEGY_OPTIONS_VERSION))
    fail(DDP_E_INVALID_ARGUMENT, "ddp_strategy_new: unknown options version " + std::to_string(opts->version));
  ddp_strategy_options in = DDP_STRATEGY_OPTIONS_INIT;
  if (opts) std::memcpy(&in, opts, options_bytes(opts->version));
  ddp::core::check_arg(in.kind == DDP_STRATEGY_DDP || in.kind == DDP_STRATEGY_DDP_SPAWN || in.kind == DDP_STRATEGY_DDP_FORK,
                       "ddp_strategy_new: unknown kind " + std::to_string(static_cast<int>(in.kind)));
  ddp::core::check_arg(in.accelerator == DDP_DEVICE_CPU || in.accelerator == DDP_DEVICE_CUDA,
                       "ddp_strategy_new: unknown accelerator " + std::to_string(static_cast<int>(in.accelerator)));
  ddp::core::check_arg(in.timeout_ms >= 0, "ddp_strategy_new: timeout_ms " + std::to_string(in.timeout_ms) + " is negative");
  o.sync_batchnorm = in.sync_batchnorm != 0;
  o.static_graph = in.static_graph != 0;
  o.accelerator = static_cast<ddp::core::DeviceType>(in.accelerator);
  o.devices = in.devices;
  o.launch_local_ranks = in.kind == DDP_STRATEGY_DDP;
  if (in.backend) o.backend = in.backend;
  if (in.state_dict_prefix) o.state_dict_prefix = in.state_dict_prefix;
  ddp::core::check_arg(in.requeue_signal >= -1, "ddp_strategy_new: requeue_signal " +
                                                    std::to_string(in.requeue_signal) + " is not a signal (-1: off)");
  o.requeue_signal = in.requeue_signal == 0 ? SIGUSR1 : in.requeue_signal < 0 ? 0 : in.requeue_signal;
  if (in.timeout_ms > 0) o.timeout = ddp::core::Millis(in.timeout_ms);
  o.ddp.bucket_cap_mb = in.bucket_cap_mb;
  o.ddp.first_bucket_mb = in.first_bucket_mb;
  o.ddp.find_unused_parameters = in.find_unused_parameters != 0;
  o.ddp.gradient_as_bucket_view = in.gradient_as_bucket_view != 0;
  o.ddp.join_enabled = in.join_enabled != 0;
  o.ddp.divide_by_initial_world_size = in.divide_by_initial_world_size != 0;
  o.broadcast_buffers = in.broadcast_buffers != 0;
  o.model_averaging_period = in.model_averaging_period;
  o.model_averaging_warmup = in.model_averaging_warmup;
  if (in.precision) o.precision = in.precision;
  o.gradient_clipping.value = in.gradient_clip_val;
  o.gradient_clipping.algorithm = static_cast<ddp::core::ClipAlgorithm>(in.gradient_clip_algorithm);
  if (in.cluster_environment && in.cluster_callbacks)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_strategy_new: cluster_environment and cluster_callbacks are both set; give one");
  if (in.cluster_environment) {
    ddp::core::ClusterEnv e = require(in.cluster_environment, "cluster_environment")->env;
    o.cluster_environment = [e] { return e; };
  }
  if (in.cluster_callbacks) {
    ddp_cluster_callbacks cb = *in.cluster_callbacks;
    o.cluster_environment = [cb] { return env_from_callbacks(cb); };
  }
  if (in.checkpoint_io) {
    const ddp_checkpoint_io& io = *in.checkpoint_io;
    if (!io.save || !io.load || !io.remove)
      fail(DDP_E_INVALID_ARGUMENT, std::string("ddp_strategy_new: checkpoint_io's ") +
                                       (!io.save ? "save" : !io.load ? "load" : "remove") + " callback is NULL");
    o.checkpoint_io = std::make_shared<CallbackCheckpointIO>(io);
  }
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

// The modules of a checkpoint call with their prefixes (none given: one
// module under the options' state_dict_prefix).
std::vector<ddp::core::CheckpointModule> checkpoint_modules(const ddp::core::DdpStrategy& st, ddp_module* const* modules,
                                                            const char* const* prefixes, size_t n, const char* fn) {
  if (n == 0 || !modules) fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": no module given");
  if (!prefixes && n > 1)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": " + std::to_string(n) + " modules need a prefix each");
  std::vector<ddp::core::CheckpointModule> out;
  for (size_t i = 0; i < n; ++i) {
    auto* h = require(modules[i], ("module " + std::to_string(i)).c_str());
    if (prefixes && !prefixes[i])
      fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": the prefix of module " + std::to_string(i) + " is NULL");
    out.push_back({h->module.get(), prefixes ? std::string(prefixes[i]) : st.state_dict_prefix()});
  }
  return out;
}

// The strategy's group handle for the collectives of collectives.h.
ddp_status group_for(ddp_strategy* s, const char* fn, ddp_group** g) {
  return fence([&] {
    *g = require(s, "strategy")->group;
    if (!*g) fail(DDP_E_STATE, std::string(fn) + ": before ddp_strategy_setup_environment");
  });
}

}  // namespace

extern "C" {

ddp_status ddp_byte_sink_write(ddp_byte_sink* sink, const void* data, size_t len) {
  if (!data && len > 0) return invalid("ddp_byte_sink_write: data is NULL with len > 0");
  return fence([&] {
    auto* s = require(sink, "ddp_byte_sink_write: sink");
    auto* p = static_cast<const uint8_t*>(data);
    s->bytes.insert(s->bytes.end(), p, p + len);
  });
}

ddp_status ddp_strategy_options_init(ddp_strategy_options* opts, unsigned int version) {
  if (opts && version >= 1 && version < DDP_STRATEGY_OPTIONS_VERSION) {
    ddp_strategy_options d = DDP_STRATEGY_OPTIONS_INIT;
    d.version = version;
    if (version < 3) d.devices = 1;  // the default before version 3
    std::memcpy(opts, &d, options_bytes(version));
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
int ddp_strategy_sync_batchnorm_layers(const ddp_strategy* s) {
  auto* h = live(s);
  return h ? h->strategy->sync_batchnorm_layers() : -1;
}
int ddp_strategy_devices(const ddp_strategy* s) { auto* h = live(s); return h ? h->strategy->devices() : -1; }
const char* ddp_strategy_precision(const ddp_strategy* s) {
  auto* h = live(s);
  return h ? h->strategy->precision().name.c_str() : "";
}
const char* ddp_strategy_precision_warning(const ddp_strategy* s) {
  auto* h = live(s);
  return h ? h->strategy->precision().warning.c_str() : "";
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

ddp_status ddp_strategy_call(ddp_strategy* s, ddp_module* m, const char* method, const ddp_tensor* const* inputs,
                             size_t num_inputs, ddp_outputs** out) {
  return ddp_strategy_call_v2(s, m, method, inputs, num_inputs, nullptr, nullptr, 0, out);
}

ddp_status ddp_strategy_call_v2(ddp_strategy* s, ddp_module* m, const char* method, const ddp_tensor* const* inputs,
                                size_t num_inputs, const char* const* kw_names, const ddp_tensor* const* kw_values,
                                size_t num_kw, ddp_outputs** out) {
  if (!out) return invalid("ddp_strategy_call: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto& st = strategy_of(s);
    auto* mod = require(m, "module");
    hand_out(out, wrap_outputs(st.call(*mod->module, method ? method : "forward", tensors_of(inputs, num_inputs),
                                       keywords_of(kw_names, kw_values, num_kw))));
  });
}

ddp_status ddp_strategy_requeue_requested(ddp_strategy* s, int* out) {
  if (!out) return invalid("ddp_strategy_requeue_requested: out is NULL");
  *out = 0;
  return fence([&] { *out = strategy_of(s).requeue_requested() ? 1 : 0; });
}

ddp_status ddp_strategy_forward_begin(ddp_strategy* s, ddp_module* m) {
  return fence([&] { strategy_of(s).forward_begin(*require(m, "module")->module); });
}

ddp_status ddp_strategy_forward_end(ddp_strategy* s) {
  return fence([&] { strategy_of(s).forward_end(); });
}

ddp_status ddp_strategy_optimizer_step_fn(ddp_strategy* s, int (*step)(void* user_data), void* user_data, int* stepped) {
  if (stepped) *stepped = 0;
  if (!step) return invalid("ddp_strategy_optimizer_step_fn: step is NULL");
  return fence([&] {
    bool ran = strategy_of(s).optimizer_step([&] {
      int rc = step(user_data);
      if (rc != 0) fail(DDP_E_INVALID_ARGUMENT, "ddp_strategy_optimizer_step_fn: the step callback returned " +
                                                    std::to_string(rc));
    });
    if (stepped) *stepped = ran ? 1 : 0;
  });
}

ddp_status ddp_strategy_join(ddp_strategy* s) {
  return fence([&] { strategy_of(s).join(); });
}

ddp_status ddp_strategy_requeue(ddp_strategy* s) {
  return fence([&] { strategy_of(s).requeue(); });
}

ddp_status ddp_strategy_backward(ddp_strategy* s, const ddp_tensor* loss) {
  return fence([&] { strategy_of(s).backward(require(loss, "loss")->t); });
}

ddp_status ddp_strategy_optimizer_step(ddp_strategy* s, ddp_optimizer* opt) {
  return ddp_strategy_optimizer_step_v2(s, opt, nullptr);
}

ddp_status ddp_strategy_optimizer_step_v2(ddp_strategy* s, ddp_optimizer* opt, int* stepped) {
  if (stepped) *stepped = 0;
  return fence([&] {
    bool ran = strategy_of(s).optimizer_step(*require(opt, "optimizer")->optimizer);
    if (stepped) *stepped = ran ? 1 : 0;
  });
}

ddp_status ddp_strategy_block_backward_sync(ddp_strategy* s, int on) {
  return fence([&] { strategy_of(s).block_backward_sync(on != 0); });
}

ddp_status ddp_strategy_barrier(ddp_strategy* s, const char* name) {
  return fence([&] { strategy_of(s).barrier(name ? name : ""); });
}

ddp_status ddp_strategy_reduce(ddp_strategy* s, ddp_tensor* t, ddp_reduce_op op) {
  return ddp_strategy_reduce_v2(s, t, op, nullptr);
}

ddp_status ddp_strategy_reduce_v2(ddp_strategy* s, ddp_tensor* t, ddp_reduce_op op, ddp_group* group) {
  return fence([&] {
    strategy_of(s).reduce(require(t, "tensor")->t, to_core(op), group ? require(group, "group")->group : nullptr);
  });
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

ddp_status ddp_strategy_all_gather_v2(ddp_strategy* s, const ddp_tensor* in, int sync_grads, ddp_tensor** out) {
  return ddp_strategy_all_gather_v3(s, in, sync_grads, nullptr, out);
}

ddp_status ddp_strategy_all_gather_v3(ddp_strategy* s, const ddp_tensor* in, int sync_grads, ddp_group* group,
                                      ddp_tensor** out) {
  if (!out) return invalid("ddp_strategy_all_gather: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto& st = strategy_of(s);
    hand_out(out, wrap_tensor(st.all_gather(require(in, "input")->t, sync_grads != 0,
                                            group ? require(group, "group")->group : nullptr)));
  });
}

ddp_status ddp_strategy_batch_norm(ddp_strategy* s, const ddp_tensor* input, const ddp_tensor* weight,
                                   const ddp_tensor* bias, ddp_tensor* running_mean, ddp_tensor* running_var,
                                   int training, double momentum, double eps, ddp_tensor** out) {
  if (!out) return invalid("ddp_strategy_batch_norm: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto& st = strategy_of(s);
    auto optional = [](const ddp_tensor* t, const char* what) { return t ? require(t, what)->t : at::Tensor(); };
    hand_out(out, wrap_tensor(st.batch_norm(require(input, "input")->t, optional(weight, "weight"),
                                            optional(bias, "bias"), optional(running_mean, "running_mean"),
                                            optional(running_var, "running_var"), training != 0, momentum, eps)));
  });
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

namespace {

ddp::core::TrainingObjects objects_of(ddp_optimizer* const* opts, size_t num_opts, ddp_lr_scheduler* const* scheds,
                                      size_t num_scheds) {
  if (num_opts > 0 && !opts) fail(DDP_E_INVALID_ARGUMENT, "checkpoint: opts is NULL with num_opts > 0");
  if (num_scheds > 0 && !scheds) fail(DDP_E_INVALID_ARGUMENT, "checkpoint: scheds is NULL with num_scheds > 0");
  ddp::core::TrainingObjects o;
  for (size_t i = 0; i < num_opts; ++i) o.optimizers.push_back(require(opts[i], "optimizer")->optimizer.get());
  for (size_t i = 0; i < num_scheds; ++i) o.schedulers.push_back(require(scheds[i], "scheduler")->scheduler.get());
  return o;
}

// A version 1 ddp_checkpoint_info ends before samples_in_epoch.
constexpr size_t kInfoV1Bytes = offsetof(ddp_checkpoint_info, samples_in_epoch);

void check_info(const ddp_checkpoint_info* info, const char* fn) {
  if (!info) return;
  if (info->version < 1 || info->version > DDP_CHECKPOINT_INFO_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": unknown info version " + std::to_string(info->version));
  if (!info->user && info->user_len > 0) fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": user is NULL with user_len > 0");
  if (info->version >= 2 && info->samples_in_epoch < 0)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": samples_in_epoch " + std::to_string(info->samples_in_epoch) +
                                     " is negative");
  // Lightning's counters never are; the file name and the fit loop's
  // progress are made of them.
  for (auto [name, v] : {std::pair<const char*, int64_t>{"step", info->step}, {"epoch", info->epoch},
                         {"batches_in_epoch", info->batches_in_epoch}})
    if (v < 0) fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": " + name + " " + std::to_string(v) + " is negative");
  if (info->batches_in_epoch > 0 && info->epoch > std::numeric_limits<int64_t>::max() / info->batches_in_epoch)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": epoch " + std::to_string(info->epoch) + " times batches_in_epoch " +
                                     std::to_string(info->batches_in_epoch) +
                                     " (the batches Lightning's fit loop counts) is past int64");
}

ddp::core::CheckpointInfo info_in(const ddp_checkpoint_info* info) {
  ddp::core::CheckpointInfo i;
  if (!info) return i;
  i.step = info->step;
  i.epoch = info->epoch;
  i.batches_in_epoch = info->batches_in_epoch;
  auto* bytes = static_cast<const uint8_t*>(info->user);
  i.user.assign(bytes, bytes + info->user_len);
  if (info->version >= 2) i.samples_in_epoch = info->samples_in_epoch;
  return i;
}

// Written within the caller's version of the struct (a version it does not
// know, e.g. memory it never initialised, is written as version 1: the least).
void info_out(const ddp::core::CheckpointInfo& c, ddp_checkpoint_info* info) {
  if (!info) return;
  const unsigned int version = info->version == DDP_CHECKPOINT_INFO_VERSION ? info->version : 1;
  ddp_checkpoint_info full{version, c.step, c.epoch, c.batches_in_epoch, nullptr, 0, c.samples_in_epoch, c.world_size};
  std::memcpy(static_cast<void*>(info), &full, version == 1 ? kInfoV1Bytes : sizeof full);
}

void hand_out_bytes(ddp_buffer** out, std::vector<uint8_t> bytes) {
  if (!out) return;
  auto b = std::make_unique<ddp_buffer>();
  b->bytes = std::move(bytes);
  hand_out(out, std::move(b));
}

}  // namespace

ddp_status ddp_strategy_save_checkpoint_v3(ddp_strategy* s, const char* path, ddp_module* const* modules,
                                           const char* const* prefixes, size_t num_modules, ddp_optimizer* const* opts,
                                           size_t num_opts, ddp_lr_scheduler* const* scheds, size_t num_scheds,
                                           const ddp_checkpoint_info* info) {
  if (!path) return invalid("ddp_strategy_save_checkpoint: path is NULL");
  return fence([&] {
    check_info(info, "ddp_strategy_save_checkpoint");
    auto& st = strategy_of(s);
    st.save_checkpoint(path, checkpoint_modules(st, modules, prefixes, num_modules, "ddp_strategy_save_checkpoint"),
                       objects_of(opts, num_opts, scheds, num_scheds), info_in(info));
  });
}

ddp_status ddp_strategy_load_checkpoint_v3(ddp_strategy* s, const char* path, ddp_module* const* modules,
                                           const char* const* prefixes, size_t num_modules, ddp_optimizer* const* opts,
                                           size_t num_opts, ddp_lr_scheduler* const* scheds, size_t num_scheds,
                                           ddp_checkpoint_info* info, ddp_buffer** user) {
  if (user) *user = nullptr;
  if (!path) return invalid("ddp_strategy_load_checkpoint: path is NULL");
  return fence([&] {
    auto& st = strategy_of(s);
    ddp::core::CheckpointInfo c =
        st.load_checkpoint(path, checkpoint_modules(st, modules, prefixes, num_modules, "ddp_strategy_load_checkpoint"),
                           objects_of(opts, num_opts, scheds, num_scheds));
    info_out(c, info);
    hand_out_bytes(user, std::move(c.user));
  });
}

ddp_status ddp_strategy_save_checkpoint_to_dir(ddp_strategy* s, const char* dir, int keep_last,
                                               ddp_module* const* modules, const char* const* prefixes,
                                               size_t num_modules, ddp_optimizer* const* opts, size_t num_opts,
                                               ddp_lr_scheduler* const* scheds, size_t num_scheds,
                                               const ddp_checkpoint_info* info) {
  if (!dir || !*dir) return invalid("ddp_strategy_save_checkpoint_to_dir: dir is NULL or empty");
  if (keep_last < 0)
    return invalid("ddp_strategy_save_checkpoint_to_dir: keep_last " + std::to_string(keep_last) + " is negative");
  return fence([&] {
    check_info(info, "ddp_strategy_save_checkpoint_to_dir");
    auto& st = strategy_of(s);
    st.save_checkpoint_to_dir(
        dir, keep_last, checkpoint_modules(st, modules, prefixes, num_modules, "ddp_strategy_save_checkpoint_to_dir"),
        objects_of(opts, num_opts, scheds, num_scheds), info_in(info));
  });
}

ddp_status ddp_strategy_resume_from_dir(ddp_strategy* s, const char* dir, ddp_module* const* modules,
                                        const char* const* prefixes, size_t num_modules, ddp_optimizer* const* opts,
                                        size_t num_opts, ddp_lr_scheduler* const* scheds, size_t num_scheds,
                                        int* resumed, ddp_checkpoint_info* info, ddp_buffer** user,
                                        ddp_buffer** report) {
  if (user) *user = nullptr;
  if (report) *report = nullptr;
  if (!resumed) return invalid("ddp_strategy_resume_from_dir: resumed is NULL");
  *resumed = 0;
  if (!dir || !*dir) return invalid("ddp_strategy_resume_from_dir: dir is NULL or empty");
  return fence([&] {
    auto& st = strategy_of(s);
    auto r = st.resume_from_dir(dir, checkpoint_modules(st, modules, prefixes, num_modules, "ddp_strategy_resume_from_dir"),
                                objects_of(opts, num_opts, scheds, num_scheds));
    if (!r.resumed) return;
    *resumed = 1;
    info_out(r.info, info);
    hand_out_bytes(user, std::move(r.info.user));
    std::string text;
    for (const auto& p : r.passed_over) text += "passed over " + p + "\n";
    text += "resumed from " + r.path + "\n";
    hand_out_bytes(report, std::vector<uint8_t>(text.begin(), text.end()));
  });
}

ddp_status ddp_strategy_save_checkpoint_v2(ddp_strategy* s, const char* path, const ddp_module* m,
                                           ddp_optimizer* const* opts, size_t num_opts, ddp_lr_scheduler* const* scheds,
                                           size_t num_scheds, const ddp_checkpoint_info* info) {
  ddp_module* one = const_cast<ddp_module*>(m);
  return ddp_strategy_save_checkpoint_v3(s, path, &one, nullptr, 1, opts, num_opts, scheds, num_scheds, info);
}

ddp_status ddp_strategy_load_checkpoint_v2(ddp_strategy* s, const char* path, ddp_module* m, ddp_optimizer* const* opts,
                                           size_t num_opts, ddp_lr_scheduler* const* scheds, size_t num_scheds,
                                           ddp_checkpoint_info* info, ddp_buffer** user) {
  return ddp_strategy_load_checkpoint_v3(s, path, &m, nullptr, 1, opts, num_opts, scheds, num_scheds, info, user);
}

ddp_status ddp_strategy_save_checkpoint(ddp_strategy* s, const char* path, const ddp_module* m, const ddp_optimizer* opt,
                                        int64_t step, int64_t epoch, const void* user, size_t user_len) {
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.step = step;
  info.epoch = epoch;
  info.user = user;
  info.user_len = user_len;
  auto* o = const_cast<ddp_optimizer*>(opt);
  return ddp_strategy_save_checkpoint_v2(s, path, m, opt ? &o : nullptr, opt ? 1 : 0, nullptr, 0, &info);
}

ddp_status ddp_strategy_load_checkpoint(ddp_strategy* s, const char* path, ddp_module* m, ddp_optimizer* opt,
                                        int64_t* step, int64_t* epoch, ddp_buffer** user) {
  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  ddp_status rc = ddp_strategy_load_checkpoint_v2(s, path, m, opt ? &opt : nullptr, opt ? 1 : 0, nullptr, 0, &info, user);
  if (rc == DDP_OK) {
    if (step) *step = info.step;
    if (epoch) *epoch = info.epoch;
  }
  return rc;
}

ddp_status ddp_strategy_save_module(ddp_strategy* s, const char* path, const ddp_module* m) {
  if (!path) return invalid("ddp_strategy_save_module: path is NULL");
  return fence([&] { strategy_of(s).save_module(path, *require(m, "module")->module); });
}

ddp_status ddp_strategy_remove_checkpoint(ddp_strategy* s, const char* path) {
  if (!path) return invalid("ddp_strategy_remove_checkpoint: path is NULL");
  return fence([&] { strategy_of(s).remove_checkpoint(path); });
}

ddp_status ddp_strategy_teardown(ddp_strategy* s) {
  return fence([&] {
    auto* h = require(s, "strategy");
    h->strategy->refuse_while_running("teardown");  // before the group's handle goes
    release(h->group);
    h->group = nullptr;
    h->strategy->teardown();
  });
}

void ddp_strategy_free(ddp_strategy* s) {
  // From code that one of its calls runs (a comm hook, an optimizer
  // closure, a checkpoint_io callback), the strategy is in use by that call.
  release_unless_in_use(
      s, [](const ddp_strategy& h) { return h.strategy && h.strategy->running_a_call(); },
      "ddp_strategy_free: called from code that a call of this strategy runs (a comm hook, an optimizer closure, a "
      "checkpoint_io callback); the strategy is in use until that call returns, and is not freed (free it after)");
}

}  // extern "C"
