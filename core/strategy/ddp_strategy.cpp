#include "strategy/ddp_strategy.h"

#include <cstdio>
#include <new>

#include "checkpoint/lightning_checkpoint.h"

#include <ATen/core/grad_mode.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include "comm/all_gather_grad.h"
#include "comm/collectives.h"
#include "comm/sync_batch_norm.h"
#include "common/cuda_plugin.h"
#include "common/error.h"
#include "hooks/post_localsgd.h"
#include "memory/host_cache.h"
#include "model/seeding.h"
#include "reducer/autograd_hooks.h"
#include "strategy/logged_metric.h"
#include "strategy/slurm_requeue.h"
#include "strategy/popen_launcher.h"
#include "strategy/sync_batchnorm.h"
#include "tensor/tensors.h"

namespace ddp::core {

DdpStrategy::DdpStrategy(StrategyOptions opts) : opts_(std::move(opts)) {
  // Every option's policy lives here; the C layer only translates.
  check_arg(opts_.accelerator == DeviceType::CPU || opts_.accelerator == DeviceType::CUDA,
            "strategy: unknown accelerator " + std::to_string(static_cast<int>(opts_.accelerator)));
  check_arg(opts_.model_averaging_period >= 0, "strategy: model_averaging_period " +
                                                   std::to_string(opts_.model_averaging_period) + " is negative");
  check_arg(opts_.model_averaging_warmup >= 0, "strategy: model_averaging_warmup " +
                                                   std::to_string(opts_.model_averaging_warmup) + " is negative");
  check_arg(opts_.devices >= 0, "strategy: devices " + std::to_string(opts_.devices) +
                                    " must be at least 1, or 0 for auto");
  check_timeout(opts_.timeout, "strategy: timeout");  // refused here, not first at setup_environment
  check_bucket_caps(opts_.ddp.first_bucket_mb, opts_.ddp.bucket_cap_mb);
  check_arg(opts_.gradient_clipping.algorithm == ClipAlgorithm::Norm ||
                opts_.gradient_clipping.algorithm == ClipAlgorithm::Value,
            "strategy: unknown gradient_clip_algorithm " +
                std::to_string(static_cast<int>(opts_.gradient_clipping.algorithm)));
  precision_ = std::make_unique<PrecisionPlugin>(resolve_precision(opts_.precision, opts_.accelerator),
                                                 opts_.gradient_clipping);
  local_checkpoint_files_ = !opts_.checkpoint_io;
  if (!opts_.checkpoint_io) opts_.checkpoint_io = file_checkpoint_io();
  devices_ = opts_.devices;
}

// Freeing tears the strategy down (strategy.h): after a completed setup the
// ranks the popen launcher started are finishing the same program, so they
// get the strategy's timeout to end, as teardown() gives them; stopping them
// at once lost what they had not flushed yet. Without a group (setup never
// completed) they failed the same setup, told by the group's abort key, and
// end within moments with their own exit status (the root cause, where it
// was theirs); or they wait for a rank 0 that gave up: stopped after that
// grace. 5 s, as ddp_spawn's SIGTERM grace: 2 s was too short for a rank
// ending under load (an ASan build's leak scan on a busy 2-core host took
// longer, and the rank was stopped instead of ending with its own status).
constexpr Millis kSetupFailureGrace{5000};
DdpStrategy::~DdpStrategy() {
  if (!launcher_) return;
  const Millis wait = group_ ? opts_.timeout : std::min(opts_.timeout, kSetupFailureGrace);
  release_group();  // first, so that a rank still waiting on this one sees it leave
  try {
    launcher_->finish(wait);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "libddp: ddp_strategy_free: %s\n", e.what());
  }
}

int DdpStrategy::devices_for(const ClusterEnv& env, bool launched) const {
  if (launched) {
    // A launcher (ddprun, torchrun, SLURM, ...) or the caller's environment
    // started the ranks, and says how many on this node: an explicit count
    // must agree (Lightning's validate_settings), or ranks would wait for
    // processes that nobody starts.
    check_arg(!opts_.launch_local_ranks || opts_.devices == 0 || opts_.devices == env.local_world_size,
              "strategy: devices=" + std::to_string(opts_.devices) + " but the " + env.name +
                  " environment started " + std::to_string(env.local_world_size) +
                  " process(es) on this node; set devices to the launcher's processes per node, or 0 (auto)");
    return env.local_world_size;
  }
  if (opts_.devices > 0) return opts_.devices;
  if (opts_.accelerator != DeviceType::CUDA) return 1;
  require_cuda_runtime();
  int visible = at::detail::getCUDAHooks().deviceCount();
  if (visible < 1) fail(Status::Unsupported, "strategy: devices auto with the CUDA accelerator, but no CUDA device is visible");
  return visible;
}

void DdpStrategy::setup_environment() {
  if (group_) fail(Status::State, "strategy: setup_environment was called already; teardown first");
  ClusterEnv env;
  bool launched;
  if (opts_.cluster_environment) {
    env = opts_.cluster_environment();
    validate_cluster_env(env, "the caller's cluster environment");
    launched = true;
  } else {
    env = detect_cluster_env(process_env_lookup());
    // Workers of ddp_spawn have their number from the spawn call.
    launched = env.name != "lightning";
  }
  int devices = devices_for(env, launched);
  if (!launched && opts_.launch_local_ranks && devices > 1 && env.world_size == 1) {
    launcher_ = std::make_unique<PopenLauncher>();
    env = launcher_->launch(devices, env.master_addr, Millis(5000));
  }
  setup_environment(env);
  devices_ = devices;
}

void DdpStrategy::setup_environment(const ClusterEnv& env) {
  if (group_) fail(Status::State, "strategy: setup_environment was called already; teardown first");
  // Training on the host frees and allocates the same large tensors every
  // step; the host cache (memory/host_cache.h) spares their page faults.
  size_t host_cache_bytes = opts_.accelerator == DeviceType::CPU ? host_cache_limit_from_env() : 0;
  GroupOptions g;
  g.backend = opts_.backend;
  g.timeout = opts_.timeout;
  g.device = {opts_.accelerator, opts_.accelerator == DeviceType::CUDA ? env.local_rank : 0};
  if (launcher_) g.give_up = [launcher = launcher_.get()] { return launcher->ended_rank(); };
  group_ = std::shared_ptr<Group>(Group::init(env, g));
  env_ = env;
  host_cache_ = std::make_unique<HostCacheUse>(host_cache_bytes);
  // Lightning installs its SLURM requeue handler when it runs under SLURM
  // (SLURMEnvironment's auto_requeue).
  if (env.name == "slurm" && opts_.requeue_signal > 0)
    requeue_signal_ = std::make_unique<RequeueSignal>(opts_.requeue_signal);
}

bool DdpStrategy::requeue_requested() {
  require_setup("requeue_requested");
  const bool mine = requeue_signal_ && requeue_signal_->received();
  // Any rank's signal stops every rank at the same step.
  return naming_failed_rank([&] {
    auto p = reduce_boolean_decision(*group_, mine, /*all=*/false);
    p->wait();
    return p->decision;
  });
}

void DdpStrategy::requeue() {
  require_setup("requeue");
  on_rank_zero("requeue", "requeue the job", [&] { slurm_requeue(slurm_job_to_requeue(), Millis(60000)); });
}

template <typename F>
auto DdpStrategy::naming_failed_rank(F&& step) -> decltype(step()) {
  Running running(running_);
  try {
    return step();
  } catch (const Error& e) {
    if (!launcher_ || (e.status() != Status::PeerFailed && e.status() != Status::Timeout)) throw;
    std::string who = launcher_->failed_rank(Millis(2000));
    if (who.empty()) throw;
    fail(e.status(), std::string(e.what()) + "; " + who);
  }
}

void DdpStrategy::run_collective(const std::function<void()>& step) { naming_failed_rank(step); }

void DdpStrategy::require_setup(const char* what) const {
  if (!group_) fail(Status::State, std::string("strategy: ") + what + " before setup_environment");
}

int DdpStrategy::global_rank() const { return group_ ? group_->rank() : 0; }
int DdpStrategy::local_rank() const { return group_ ? env_.local_rank : 0; }
int DdpStrategy::node_rank() const { return group_ ? env_.node_rank : 0; }
int DdpStrategy::world_size() const { return group_ ? group_->size() : 1; }

Device DdpStrategy::root_device() const {
  if (opts_.accelerator == DeviceType::CUDA) return {DeviceType::CUDA, local_rank()};
  return {DeviceType::CPU, 0};
}

const std::shared_ptr<Group>& DdpStrategy::group() const {
  require_setup("group");
  return group_;
}

void DdpStrategy::setup_module(ScriptModule& module) {
  require_setup("setup_module");
  for (const auto& w : wrapped_)
    if (w.module == &module) fail(Status::State, "strategy: this module is set up already; teardown first");
  // A comm hook's state (PowerSGD's error feedback, post-local SGD's step)
  // and the model averager follow one module's gradients and parameters.
  if (!wrapped_.empty() && (opts_.comm_hook || opts_.model_averaging_period > 0 || opts_.ddp.join_enabled))
    fail(Status::Unsupported, "strategy: a second module cannot be set up with a comm hook, model averaging or join "
                              "(they follow one module)");
  if (module.caller_owned()) {
    // The caller's tensors are the model: never moved or cast here.
    const at::Device root = to_aten_device(root_device());
    const auto half = precision_->choice().precision == Precision::Bf16True   ? at::kBFloat16
                      : precision_->choice().precision == Precision::Fp16True ? at::kHalf
                                                                             : at::ScalarType::Undefined;
    for (const auto& t : module.state()) {
      check_arg(t.tensor.device() == root, "setup_module: '" + t.name + "' is on " + t.tensor.device().str() +
                                               ", the strategy's root device is " + root.str());
      check_arg(half == at::ScalarType::Undefined || !t.tensor.is_floating_point() || t.tensor.scalar_type() == half,
                "setup_module: '" + t.name + "' is " + std::string(c10::toString(t.tensor.scalar_type())) + "; " +
                    precision_->choice().name + " needs the model cast to " + c10::toString(half) + " first");
    }
    precision_->prepare(root);
  } else {
    module.to(root_device());
    precision_->convert_module(module, to_aten_device(root_device()));
  }
  if (opts_.sync_batchnorm && !module.caller_owned()) {
    // Lightning converts in setup, as SyncBatchNorm.convert_sync_batchnorm.
    if (!sync_batchnorm_) sync_batchnorm_ = std::make_unique<SyncBatchNormBinding>(group_);
    sync_batchnorm_layers_ += convert_sync_batchnorm(module, *sync_batchnorm_);
  }
  // As PyTorch's DDP: only the parameters that require grad are the
  // engine's (it broadcasts rank 0's); frozen ones (fine-tuning with a
  // frozen backbone) and the buffers get rank 0's values here.
  WrappedModule w;
  w.module = &module;
  for (auto& p : module.parameters()) {
    if (p.requires_grad()) w.params.push_back(p);
    else broadcast_blocking(*group_, p, 0);
  }
  for (auto& b : module.buffers()) broadcast_blocking(*group_, b, 0);
  if (w.params.empty())
    fail(Status::InvalidArgument, "setup_module: no parameter of the module requires grad (DDP has nothing to synchronise)");
  // Each module has its own engine, as each DistributedDataParallel wrapper
  // has its own reducer: a backward through some of the modules (a GAN's
  // discriminator step) synchronises those alone.
  ReducerOptions o = opts_.ddp;
  o.broadcast_parameters = true;
  o.static_graph = opts_.static_graph;
  w.reducer = make_autograd_reducer(*group_, w.params, o);
  w.reducer->set_sync(sync_enabled_);
  if (opts_.comm_hook) w.reducer->set_comm_hook(opts_.comm_hook);
  if (opts_.model_averaging_period > 0)
    averager_ = std::make_unique<ModelAverager>(*group_, opts_.model_averaging_period, opts_.model_averaging_warmup);
  wrapped_.push_back(std::move(w));
}

at::Tensor DdpStrategy::forward(ScriptModule& module, const at::Tensor& input) {
  return single_output(call(module, "forward", {input}), "strategy forward");
}

bool DdpStrategy::forward_syncs_buffers() const {
  // PyTorch's DDP syncs buffers for a forward whose gradients will be
  // synchronised: autograd recording and no no_sync. PyTorch decides from
  // the previous forward's state (so its first no_grad forward after
  // training still broadcasts); this decides from the call's own, so an
  // evaluation forward is never a collective and ranks may evaluate
  // different numbers of batches.
  return opts_.broadcast_buffers && group_->size() > 1 && at::GradMode::is_enabled() && sync_enabled_;
}

void DdpStrategy::pre_forward(ScriptModule& module) {
  // Join: a synchronised step starts with the count of ranks still
  // training (PyTorch's DDP counts in its forward), which the joined ranks
  // match; the buffers then come from the highest such rank.
  const bool joining = opts_.ddp.join_enabled && at::GradMode::is_enabled() && sync_enabled_;
  if (joining)
    for (auto& w : wrapped_)
      if (w.module == &module) w.reducer->begin_synchronised_step();
  const auto buffers = module.buffers();
  if (forward_syncs_buffers() && !buffers.empty()) {
    const int src = joining ? common_rank(true) : 0;
    for (auto& b : buffers) broadcast_blocking(*group_, b, src);
  }
}

ModuleOutputs DdpStrategy::call(ScriptModule& module, const std::string& method, const std::vector<at::Tensor>& inputs,
                                const std::vector<NamedTensor>& keywords) {
  require_setup("forward");
  check_arg(!module.caller_owned(), "strategy forward: the model was given as tensors; run its forward yourself "
                                    "between forward_begin and forward_end");
  return naming_failed_rank([&] {
    pre_forward(module);
    return precision_->call(module, method, inputs, keywords);  // moved to root_device, where setup placed the module
  });
}

void DdpStrategy::forward_begin(ScriptModule& module) {
  require_setup("forward_begin");
  if (forward_context_) fail(Status::State, "strategy: forward_begin again before forward_end");
  naming_failed_rank([&] { pre_forward(module); });
  forward_context_ = precision_->forward_context();
  if (!forward_context_) forward_context_ = std::make_shared<int>(0);  // open, without a context to hold
}

void DdpStrategy::forward_end() {
  if (!forward_context_) fail(Status::State, "strategy: forward_end without forward_begin");
  forward_context_.reset();
}

std::vector<at::Tensor> DdpStrategy::all_parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& w : wrapped_) out.insert(out.end(), w.params.begin(), w.params.end());
  return out;
}

bool DdpStrategy::optimizer_step(const std::function<void()>& step) {
  require_setup("optimizer_step");
  if (wrapped_.empty()) fail(Status::State, "strategy: optimizer_step before setup_module");
  return naming_failed_rank([&] {
    bool stepped = precision_->optimizer_step(all_parameters(), step);
    if (averager_) averager_->step(wrapped_.front().params);
    return stepped;
  });
}

int DdpStrategy::common_rank(bool candidate) {
  // PyTorch's DDP._find_common_rank: the highest rank that is a candidate.
  at::Tensor t = at::full({1}, candidate ? group_->rank() : -1, at::TensorOptions().dtype(at::kLong))
                     .to(to_aten_device(root_device()));
  all_reduce_blocking(*group_, t, ReduceOp::Max);
  const int64_t r = t.item<int64_t>();
  if (r < 0) fail(Status::State, "join: no rank is a candidate to broadcast from");
  return static_cast<int>(r);
}

void DdpStrategy::join() {
  require_setup("join");
  if (!opts_.ddp.join_enabled) fail(Status::State, "strategy: join needs the option join_enabled on every rank");
  if (wrapped_.size() != 1) fail(Status::State, "strategy: join needs exactly one module set up");
  WrappedModule& w = wrapped_.front();
  ScriptModule& module = *const_cast<ScriptModule*>(w.module);
  naming_failed_rank([&] {
    // Shadow each step the others still take: their count, their buffer
    // broadcast, their gradient buckets (zeros from here).
    const bool buffers = opts_.broadcast_buffers && group_->size() > 1 && !module.buffers().empty();
    const bool shadowed = w.reducer->join([&] {
      if (!buffers) return;
      const int src = common_rank(false);
      for (auto& b : module.buffers()) broadcast_blocking(*group_, b, src);
    });
    // Join's post hook: every rank takes the model of the (highest) rank
    // that joined last, which took every step.
    const int src = common_rank(!shadowed);
    at::NoGradGuard no_grad;
    for (auto& t : module.state()) broadcast_blocking(*group_, t.tensor, src);
  });
}

void DdpStrategy::backward(const at::Tensor& loss) {
  require_setup("backward");
  check_arg(loss.defined() && loss.requires_grad(), "strategy backward: the loss does not require grad");
  naming_failed_rank([&] { precision_->pre_backward(loss).backward(); });
}

bool DdpStrategy::optimizer_step(Optimizer& optimizer) {
  require_setup("optimizer_step");
  return naming_failed_rank([&] {
    bool stepped = precision_->optimizer_step(optimizer.parameters(), [&] { optimizer.step(); });
    if (averager_) averager_->step(wrapped_.front().params);
    return stepped;
  });
}

void DdpStrategy::barrier(const std::string& name) {
  require_setup("barrier");
  try {
    naming_failed_rank([&] { core::barrier_blocking(*group_); });
  } catch (const Error& e) {
    if (name.empty()) throw;
    fail(e.status(), "barrier '" + name + "': " + e.what());
  }
}

const std::shared_ptr<Group>& DdpStrategy::group_or_own(const std::shared_ptr<Group>& group, const char* what) const {
  if (!group) return group_;
  check_arg(group->same_job(*group_), std::string("strategy ") + what +
                                          ": the group is not of this strategy's job (make subgroups from the "
                                          "strategy's group)");
  return group;
}

namespace {
// What a script reduces or gathers (a metric, a count) is often a host
// tensor; on a CUDA group (NCCL) it goes over on the group's device and comes
// back, as Lightning's logging moves it first. Other tensors go as they are.
bool staged_on_device(const at::Tensor& t, const Group& g) {
  return g.device().type == DeviceType::CUDA && t.device().is_cpu();
}
}  // namespace

void DdpStrategy::reduce(const at::Tensor& t, ReduceOp op, const std::shared_ptr<Group>& group) {
  require_setup("reduce");
  const auto& g = group_or_own(group, "reduce");
  naming_failed_rank([&] {
    if (!staged_on_device(t, *g)) return all_reduce_blocking(*g, t, op);
    at::Tensor on = t.to(to_aten_device(g->device()), /*non_blocking=*/false, /*copy=*/true);
    all_reduce_blocking(*g, on, op);
    t.copy_(on);
  });
}

at::Tensor DdpStrategy::all_gather(const at::Tensor& t, bool sync_grads, const std::shared_ptr<Group>& group) {
  require_setup("all_gather");
  const auto& g = group_or_own(group, "all_gather");
  at::Tensor in = sync_grads ? t : t.detach();
  return naming_failed_rank([&] {
    if (!staged_on_device(in, *g)) return all_gather_with_grad(g, in);
    // .to() on both sides keeps the gradient path of sync_grads.
    return all_gather_with_grad(g, in.to(to_aten_device(g->device()))).to(in.device());
  });
}

at::Tensor DdpStrategy::batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                                   const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                                   double momentum, double eps) {
  check_arg(input.dim() >= 2, "batch_norm: the input has " + std::to_string(input.dim()) +
                                  " dimensions; batch norm needs (N, C, ...)");
  for (const at::Tensor* t : {&weight, &bias, &running_mean, &running_var})
    check_arg(!t->defined() || (t->dim() == 1 && t->size(0) == input.size(1)),
              "batch_norm: a weight, bias or running statistic of shape " +
                  (t->defined() ? c10::str(t->sizes()) : std::string()) + " for " +
                  std::to_string(input.size(1)) + " channels");
  if (!training)
    return at::batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps, true);
  require_setup("a synchronised batch norm");
  return naming_failed_rank(
      [&] { return sync_batch_norm(group_, input, weight, bias, running_mean, running_var, momentum, eps); });
}

double DdpStrategy::compute_metric(const LoggedMetric& metric) {
  require_setup("metric compute");
  return naming_failed_rank([&] { return metric.compute(group_.get(), to_aten_device(root_device())); });
}

void DdpStrategy::block_backward_sync(bool on) {
  if (wrapped_.empty()) fail(Status::State, "strategy: block_backward_sync before setup_module");
  // Every reducer is asked before any changes: one refused (a step in
  // progress) leaves them all as they were.
  for (auto& w : wrapped_)
    if (w.reducer->sync() == on && w.reducer->step_in_progress())
      fail(Status::State, "block_backward_sync: a backward pass is synchronising gradients; call it between steps");
  sync_enabled_ = !on;
  for (auto& w : wrapped_) w.reducer->set_sync(!on);
}

void DdpStrategy::on_rank_zero(const std::string& what, const std::string& verb, const std::function<void()>& io) {
  // Rank 0's outcome ("" or why it failed) reaches every rank in place of
  // a barrier, so a failure is a status everywhere.
  Running running(running_);
  std::string failure;
  if (is_global_zero()) {
    try {
      SoloSection alone(what + "'s work on global rank 0 (a checkpoint_io callback, a file written or removed)");
      io();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  naming_failed_rank([&] {
    auto p = broadcast_bytes(*group_, failure.data(), failure.size(), 0);
    p->wait();
    failure.assign(p->bytes.begin(), p->bytes.end());
  });
  if (!failure.empty()) fail(Status::IO, what + ": global rank 0 could not " + verb + ": " + failure);
}

c10::IValue DdpStrategy::gather_hook_states() {
  if (!opts_.comm_hook) return c10::IValue();
  c10::IValue mine = opts_.comm_hook->state_dict();
  // None on every rank alike: every rank has the same kind of hook.
  if (mine.isNone()) return c10::IValue();
  return gather_rank_states(mine, "comm hook state");
}

c10::IValue DdpStrategy::gather_rank_states(const c10::IValue& mine, const std::string& what) {
  std::vector<uint8_t> bytes;
  write_torch_archive(mine, [&](const void* data, size_t n) {
    bytes.insert(bytes.end(), static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + n);
  });
  at::Tensor t = at::from_blob(bytes.data(), {static_cast<int64_t>(bytes.size())}, at::kByte)
                     .to(to_aten_device(root_device()), /*non_blocking=*/false, /*copy=*/true);
  auto p = all_gather_uneven(*group_, t);
  p->wait();
  if (!is_global_zero()) return c10::IValue();
  c10::impl::GenericList ranks(c10::AnyType::get());
  for (size_t r = 0; r < p->tensors.size(); ++r) {
    at::Tensor b = p->tensors[r].cpu().contiguous();
    ranks.push_back(read_torch_archive(bytes_source(std::vector<uint8_t>(b.data_ptr<uint8_t>(), b.data_ptr<uint8_t>() + b.numel())),
                                       "rank " + std::to_string(r) + "'s " + what));
  }
  return ranks;
}

c10::IValue DdpStrategy::this_ranks_hook_state(const c10::IValue& saved) const {
  if (saved.isNone()) return saved;
  if (!saved.isList()) fail(Status::IO, "libddp's 'comm_hook' is a " + saved.tagKind() +
                                            ", not a list of the ranks' states");
  // Saved by a job of another size: the ranks' residuals cannot be split
  // or merged, so the hook starts afresh (as a hook without saved state).
  const auto& ranks = saved.toListRef();
  if (ranks.size() != static_cast<size_t>(world_size())) return c10::IValue();
  return ranks[static_cast<size_t>(global_rank())];
}

namespace {

void check_prefixes(const std::vector<CheckpointModule>& modules, const char* what) {
  check_arg(!modules.empty(), std::string(what) + ": no module given");
  for (size_t i = 0; i < modules.size(); ++i) {
    check_arg(modules[i].module != nullptr, std::string(what) + ": module " + std::to_string(i) + " is missing");
    for (size_t j = 0; j < i; ++j)
      check_arg(modules[i].prefix != modules[j].prefix, std::string(what) + ": modules " + std::to_string(j) + " and " +
                                                            std::to_string(i) + " have the same prefix '" +
                                                            modules[i].prefix + "'");
  }
}

}  // namespace

void DdpStrategy::save_checkpoint(const std::string& path, const ScriptModule& module, const TrainingObjects& objects,
                                  const CheckpointInfo& info) {
  save_checkpoint(path, {{const_cast<ScriptModule*>(&module), opts_.state_dict_prefix}}, objects, info);
}

void DdpStrategy::save_checkpoint(const std::string& path, const std::vector<CheckpointModule>& modules,
                                  const TrainingObjects& objects, const CheckpointInfo& info) {
  require_setup("save_checkpoint");
  check_prefixes(modules, "save_checkpoint");
  const c10::IValue hook_states = naming_failed_rank([&] { return gather_hook_states(); });
  // Each rank's CPU random stream (dropout, randn), for resume_from_dir.
  const c10::IValue rng_states = naming_failed_rank([&] { return gather_rank_states(cpu_rng_state(), "RNG state"); });
  on_rank_zero("save_checkpoint", "save", [&] {
    LightningCheckpoint c;
    c.epoch = info.epoch;
    c.global_step = info.step;
    c.batches_in_epoch = info.batches_in_epoch;
    c.samples_in_epoch = info.samples_in_epoch;
    c.world_size = world_size();
    c.user = info.user;
    for (const auto& m : modules)
      for (auto& t : m.module->state()) c.state_dict.push_back({m.prefix + t.name, t.tensor});
    for (const auto* o : objects.optimizers) c.optimizer_states.push_back(o->state_dict());
    for (const auto* s : objects.schedulers) c.lr_schedulers.push_back(s->state_dict());
    c.precision = precision_->state();
    // The engine's state beyond the model: what the comm hook keeps on
    // every rank (PowerSGD's residuals and memories, post-local SGD's step
    // count) and the model averager's step, so that a resumed run goes on
    // as one that never stopped.
    c.comm_hook_state = hook_states;
    c.rng_states = rng_states;
    if (averager_) c.averager_step = averager_->steps_taken();
    opts_.checkpoint_io->save_streamed([&](const ByteSink& sink) { write_lightning_checkpoint(c, sink); }, path);
  });
}

void DdpStrategy::save_module(const std::string& path, const ScriptModule& module) {
  require_setup("save_module");
  on_rank_zero("save_module", "save", [&] { module.save(path); });
}

void DdpStrategy::remove_checkpoint(const std::string& path) {
  require_setup("remove_checkpoint");
  on_rank_zero("remove_checkpoint", "remove", [&] { opts_.checkpoint_io->remove(path); });
}

namespace {

// The module's names from a checkpoint's: Lightning's prefix taken off
// where it is there (a libddp format-1 file has none).
std::vector<NamedTensor> without_prefix(const std::string& prefix, const std::vector<NamedTensor>& v) {
  std::vector<NamedTensor> out;
  for (const auto& t : v)
    out.push_back({!prefix.empty() && t.name.compare(0, prefix.size(), prefix) == 0 ? t.name.substr(prefix.size()) : t.name,
                   t.tensor});
  return out;
}

// What a module's state came from, for its errors: the checkpoint, and the
// prefix its names were found under.
std::string module_source(const std::string& path, const std::string& prefix) {
  return prefix.empty() ? path : path + " (the entries under '" + prefix + "')";
}

// None given loads the module alone (weights only, e.g. to fine-tune);
// otherwise the counts must agree.
void check_count(size_t saved, size_t given, const char* what) {
  if (saved != 0 && given != 0 && saved != given)
    fail(Status::IO, "it holds " + std::to_string(saved) + " " + what + ", " +
                         std::to_string(given) + " were given");
}

}  // namespace

CheckpointInfo DdpStrategy::load_checkpoint(const std::string& path, ScriptModule& module, const TrainingObjects& objects) {
  return load_checkpoint(path, {{&module, opts_.state_dict_prefix}}, objects);
}

CheckpointInfo DdpStrategy::load_checkpoint(const std::string& path, const std::vector<CheckpointModule>& modules,
                                            const TrainingObjects& objects) {
  require_setup("load_checkpoint");
  check_prefixes(modules, "load_checkpoint");
  Running running(running_);  // the checkpoint_io's load callback
  // Every rank reads and checks; only when all of them can does any rank
  // change its model (a rank left behind would train apart from the rest).
  LightningCheckpoint c;
  std::vector<std::vector<NamedTensor>> module_states;
  c10::IValue hook_state;
  at::Tensor rng_state;  // this rank's saved random stream, if the file has one for it
  std::string failure;
  Status failure_status = Status::IO;
  // The CheckpointIO, the reader and the module checks name the file in
  // their refusals; the checks after them do not know which file they read,
  // and their refusals are always given its name.
  bool refusal_names_file = true;
  try {
    c = read_lightning_checkpoint(opts_.checkpoint_io->open(path), path);
    for (const auto& m : modules) {
      module_states.push_back(without_prefix(m.prefix, c.state_dict));
      m.module->check_state(module_states.back(), module_source(path, m.prefix));
    }
    refusal_names_file = false;
    check_count(c.optimizer_states.size(), objects.optimizers.size(), "optimizer states");
    check_count(c.lr_schedulers.size(), objects.schedulers.size(), "lr scheduler states");
    if (objects.optimizers.empty()) c.optimizer_states.clear();
    if (objects.schedulers.empty()) c.lr_schedulers.clear();
    for (size_t i = 0; i < c.optimizer_states.size(); ++i) objects.optimizers[i]->check_state_dict(c.optimizer_states[i]);
    for (size_t i = 0; i < c.lr_schedulers.size(); ++i) objects.schedulers[i]->check_state_dict(c.lr_schedulers[i]);
    // A checkpoint from a run without a scaler starts the scaler afresh.
    if (!c.precision.empty()) precision_->check_state(c.precision);
    // So does a hook (or an averager) the checkpoint has no state of.
    hook_state = this_ranks_hook_state(c.comm_hook_state);
    if (c.rng_states.isList() && c.rng_states.toListRef().size() > static_cast<size_t>(global_rank())) {
      // A copy: the saved one may live in the file's mapping, which holds
      // off the file's writers as long as it lives.
      rng_state = c.rng_states.toListRef()[static_cast<size_t>(global_rank())].toTensor().clone();
      const int64_t own = cpu_rng_state().numel();
      if (rng_state.numel() != own)
        fail(Status::IO, "rank " + std::to_string(global_rank()) + "'s RNG state has " +
                             std::to_string(rng_state.numel()) + " bytes, this LibTorch's has " + std::to_string(own));
      // Restored (resume_from_dir) only after every rank agreed that the
      // file loads: a stream torch refuses must fail that agreement.
      const std::string refusal = cpu_rng_state_refusal(rng_state);
      if (!refusal.empty())
        fail(Status::IO, "rank " + std::to_string(global_rank()) + "'s RNG state is not one torch takes: " + refusal);
    }
    if (opts_.comm_hook) opts_.comm_hook->check_state_dict(hook_state);
    else if (!hook_state.isNone())
      fail(Status::IO, "it holds a comm hook's state; this strategy has no comm hook (resume with the same comm hook)");
  } catch (const std::exception& e) {
    // Every failure here is the file's (or, out of memory, its size's).
    const bool no_memory = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
    if (no_memory) failure_status = Status::NoMemory;
    failure = e.what();
    // The reader's own refusals name the file; what fails beneath it
    // (LibTorch's unpickler, say) may not.
    const bool named = refusal_names_file && !no_memory && failure.find(path) != std::string::npos;
    if (!named) failure = "load_checkpoint: " + path + ": " + failure;
  }
  bool everyone = naming_failed_rank([&] {
    auto p = reduce_boolean_decision(*group_, failure.empty(), true);
    p->wait();
    return p->decision;
  });
  if (!failure.empty()) fail(failure_status, failure);
  if (!everyone) fail(Status::IO, "load_checkpoint: " + path + " could not be loaded on another rank; nothing was changed");
  for (size_t i = 0; i < modules.size(); ++i)
    modules[i].module->load_state(module_states[i], module_source(path, modules[i].prefix));
  for (size_t i = 0; i < c.optimizer_states.size(); ++i) objects.optimizers[i]->load_state_dict(c.optimizer_states[i]);
  for (size_t i = 0; i < c.lr_schedulers.size(); ++i) objects.schedulers[i]->load_state_dict(c.lr_schedulers[i]);
  if (!c.precision.empty()) precision_->load_state(c.precision);
  if (opts_.comm_hook) opts_.comm_hook->load_state_dict(hook_state);
  if (averager_ && c.averager_step >= 0) averager_->set_steps_taken(c.averager_step);
  return {c.global_step, c.epoch, c.batches_in_epoch, std::move(c.user), c.samples_in_epoch, c.world_size, rng_state};
}

void DdpStrategy::refuse_while_running(const char* call) const {
  if (running_ > 0)
    fail(Status::State, std::string(call) +
                            ": called from code that a call of this strategy runs (a comm hook, an optimizer "
                            "closure, a checkpoint_io callback); call it once that call has returned");
}

void DdpStrategy::teardown() {
  refuse_while_running("teardown");
  release_group();
  if (launcher_) {
    auto launcher = std::move(launcher_);
    launcher->finish(opts_.timeout);
  }
}

void DdpStrategy::release_group() {
  forward_context_.reset();
  requeue_signal_.reset();
  sync_batchnorm_.reset();
  sync_batchnorm_layers_ = 0;
  averager_.reset();
  wrapped_.clear();
  sync_enabled_ = true;
  group_.reset();
  host_cache_.reset();
}

}  // namespace ddp::core
