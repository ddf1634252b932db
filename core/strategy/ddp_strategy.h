// Lightning's DDPStrategy (and ParallelStrategy's surface) on the layers
// below: the environment and the group (comm/), the DDP engine with autograd
// hooks and a comm hook (reducer/, hooks/), periodic model averaging for
// post-local SGD, TorchScript modules and LibTorch optimizers (model/), and
// checkpoints (checkpoint/). It adds the order Lightning runs them in, and
// nothing of their algorithms.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/checkpoint_io.h"
#include "comm/group.h"
#include "env/cluster_env.h"
#include "hooks/comm_hook.h"
#include "model/lr_scheduler.h"
#include "model/optimizer.h"
#include "model/script_module.h"
#include "precision/precision_plugin.h"
#include "reducer/grad_reducer.h"

namespace ddp::core {

class HostCacheUse;
class RequeueSignal;
class LoggedMetric;
class SyncBatchNormBinding;
class ModelAverager;
class PopenLauncher;

struct StrategyOptions {
  DeviceType accelerator = DeviceType::CPU;  // CUDA: each rank on cuda:LOCAL_RANK
  // Lightning's devices: processes on this node; 0 is "auto": the
  // launcher's processes per node, or with no launcher 1 process (the CUDA
  // accelerator: one per visible device). When no launcher started the
  // ranks and launch_local_ranks is on, setup_environment starts the other
  // devices - 1 (PopenLauncher, Lightning's default start method). A count
  // that disagrees with the launcher's is refused naming both.
  int devices = 0;
  bool launch_local_ranks = true;
  std::string backend;                       // "": nccl for CUDA, else gloo
  Millis timeout{1800 * 1000};               // Lightning's default_pg_timeout
  ReducerOptions ddp;                        // bucket caps, find_unused_parameters, join_enabled, ...
  bool broadcast_buffers = true;             // as PyTorch's DDP: rank 0's buffers before each forward
  std::shared_ptr<CommHook> comm_hook;       // nullptr: the built-in all-reduce
  // Post-local SGD: average the parameters every `period` optimizer steps
  // from step `warmup` on (PyTorch's PeriodicModelAverager); 0: off.
  int64_t model_averaging_period = 0;
  int64_t model_averaging_warmup = 0;
  // Lightning's precision flag ("" is "32-true"; see precision_plugin.h) and
  // the Trainer's gradient_clip_val / gradient_clip_algorithm.
  std::string precision;
  GradientClipping gradient_clipping;
  // Lightning's sync_batchnorm: setup_module converts the module's batch
  // norms (strategy/sync_batchnorm.h).
  bool sync_batchnorm = false;
  // PyTorch's static_graph (reducer/grad_reducer.h).
  bool static_graph = false;
  // Lightning's cluster_environment=: called once by setup_environment in
  // place of detection (its values are then checked as a launcher's are).
  // Empty: the environment is detected.
  std::function<ClusterEnv()> cluster_environment;
  // Lightning's checkpoint_io=; nullptr: local files written atomically.
  std::shared_ptr<CheckpointIO> checkpoint_io;
  // What the LightningModule calls the model ("net." for `self.net =
  // model`): checkpoints name the module's state with it, as Lightning's
  // state_dict does, and loading takes names with or without it.
  std::string state_dict_prefix;
  // Lightning's SLURM auto-requeue: under the SLURM environment, this
  // signal (SLURM's --signal; 0: none) is caught from setup_environment to
  // teardown; see requeue_requested.
  int requeue_signal = 10;  // SIGUSR1 on Linux
};

// The counters a checkpoint carries beside the state (Lightning's epoch,
// global_step and the fit loop's batch count) and the caller's own bytes.
struct CheckpointInfo {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t batches_in_epoch = 0;
  std::vector<uint8_t> user;
  // Entries of the epoch's sampler list trained on over every rank (a
  // checkpoint inside an epoch), and on load the world size that saved it
  // (0: an older file); save writes the strategy's own.
  int64_t samples_in_epoch = 0;
  int64_t world_size = 0;
  // On load: this rank's CPU random generator state as saved (undefined:
  // none in the file); resume_from_dir restores it, load_checkpoint does not.
  at::Tensor rng_state;
};

// A module in a checkpoint's state_dict, its names under `prefix` (the
// LightningModule's attribute with its dot: "generator.").
struct CheckpointModule {
  ScriptModule* module = nullptr;
  std::string prefix;
};

// The optimizers and schedulers a checkpoint saves and restores, in the
// order Lightning keeps them (configure_optimizers' lists).
struct TrainingObjects {
  std::vector<Optimizer*> optimizers;
  std::vector<LrScheduler*> schedulers;
};

class DdpStrategy {
 public:
  explicit DdpStrategy(StrategyOptions opts);
  ~DdpStrategy();

  // Reads the cluster environment of this process (ddprun, torchrun, SLURM,
  // ...), or starts the other local ranks when none did, and joins the
  // group. Collective.
  void setup_environment();
  // The same with an environment the caller built.
  void setup_environment(const ClusterEnv& env);
  bool is_set_up() const { return group_ != nullptr; }

  int global_rank() const;
  int local_rank() const;
  int node_rank() const;
  int world_size() const;
  bool is_global_zero() const { return global_rank() == 0; }
  Device root_device() const;
  // The batch norms setup_module made synchronised (sync_batchnorm); 0
  // without the option, or for a module that has none.
  int sync_batchnorm_layers() const { return sync_batchnorm_layers_; }
  // The devices in effect: the option, or what "auto" became at setup.
  int devices() const { return devices_; }
  // The precision in effect and, when it differs from the one asked for,
  // why (Lightning's warning: "16-mixed" on the CPU is "bf16-mixed").
  const PrecisionChoice& precision() const { return precision_->choice(); }
  const std::shared_ptr<Group>& group() const;
  const std::string& state_dict_prefix() const { return opts_.state_dict_prefix; }

  // Moves the module to the root device, gives every rank rank 0's
  // parameters and buffers, and wraps it with the DDP engine (autograd hooks
  // and the comm hook). Collective. Several modules may be set up (a GAN's
  // generator and discriminator), each with its own engine, as each has its
  // own DistributedDataParallel in PyTorch; a comm hook or model averaging
  // serves one (Status::Unsupported for a second).
  void setup_module(ScriptModule& module);
  // Forward of `input` (moved to the root device) in the precision's
  // context, after rank 0's buffers were broadcast (broadcast_buffers)
  // when the forward's gradients will be synchronised: autograd recording
  // (not no_grad or inference mode) and no block_backward_sync. So an
  // evaluation forward is never a collective.
  at::Tensor forward(ScriptModule& module, const at::Tensor& input);
  // The same for the module's method `method` with several inputs and
  // outputs (ScriptModule::call).
  ModuleOutputs call(ScriptModule& module, const std::string& method, const std::vector<at::Tensor>& inputs,
                     const std::vector<NamedTensor>& keywords = {});
  // For a model the caller runs itself (ScriptModule::from_tensors): what
  // forward does before running the module (Join's count, the buffer
  // broadcast) and then the precision's context (autocast for the mixed
  // precisions), until forward_end. Status::State for a second
  // forward_begin before forward_end.
  void forward_begin(ScriptModule& module);
  void forward_end();
  // optimizer_step for the caller's own optimizer: the precision's step
  // (unscale, clip, skip on inf or NaN) around `step`, then the model
  // averager's, over the parameters of the modules set up.
  bool optimizer_step(const std::function<void()>& step);
  // loss.backward() (the loss scaled by the precision's gradient scaler):
  // the engine all-reduces the gradients as they become ready, unless
  // block_backward_sync is on.
  void backward(const at::Tensor& loss);
  // The precision's step (unscale, clip, the optimizer's step unless the
  // scaler skips it, update the scale), then the model averager's
  // (post-local SGD). Returns whether the optimizer stepped.
  bool optimizer_step(Optimizer& optimizer);
  // Lightning's barrier(name) and reduce (in place); `name` goes into the
  // message of a failure.
  void barrier(const std::string& name);
  // `group`: a subgroup of this strategy's job (nullptr: the strategy's
  // group); Status::InvalidArgument for a group of another job.
  void reduce(const at::Tensor& t, ReduceOp op, const std::shared_ptr<Group>& group = nullptr);
  // Lightning's all_gather: (world, *shape). With sync_grads the result has
  // a backward that hands each rank the sum over ranks of its slice's
  // gradient (comm/all_gather_grad.h).
  at::Tensor all_gather(const at::Tensor& t, bool sync_grads, const std::shared_ptr<Group>& group = nullptr);
  // sync_batchnorm for a model whose forward the caller runs (LibTorch
  // modules): training, batch_norm with the statistics of the global batch
  // over the strategy's group (comm/sync_batch_norm.h; collective in forward
  // and backward, every rank calls it for the same layers in the same
  // order); eval, plain batch_norm with the running statistics, no
  // collective. weight, bias and the running statistics may be undefined.
  at::Tensor batch_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias,
                        const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                        double momentum, double eps);
  // A logged metric's epoch value over the group (Lightning's sync_dist);
  // collective.
  double compute_metric(const LoggedMetric& metric);
  // Lightning's block_backward_sync (DDP's no_sync), for every module set
  // up: gradients accumulate locally while on; the first backward after it
  // is turned off syncs.
  void block_backward_sync(bool on);

  // Global rank 0 writes the checkpoint (Lightning's layout in PyTorch's
  // format, checkpoint/lightning_checkpoint.h), streamed atomically; every
  // rank then learns the outcome, so that the file exists when the call
  // returns anywhere and a failed save is Status::IO on every rank.
  void save_checkpoint(const std::string& path, const ScriptModule& module, const TrainingObjects& objects,
                       const CheckpointInfo& info);
  // The same with several modules in the one state_dict, each under its
  // prefix (distinct; Status::InvalidArgument naming a repeated one).
  void save_checkpoint(const std::string& path, const std::vector<CheckpointModule>& modules,
                       const TrainingObjects& objects, const CheckpointInfo& info);
  // Every rank reads `path` (a Lightning or libddp checkpoint); the module,
  // optimizers and schedulers change only when on every rank the whole file
  // and every entry in it fit them (else Status::IO everywhere). A file
  // without optimizer (or scheduler) states leaves those as they are; no
  // optimizers (schedulers) given loads the module without them.
  CheckpointInfo load_checkpoint(const std::string& path, ScriptModule& module, const TrainingObjects& objects);
  // The same for several modules: each takes the entries under its prefix.
  CheckpointInfo load_checkpoint(const std::string& path, const std::vector<CheckpointModule>& modules,
                                 const TrainingObjects& objects);
  // Global rank 0 writes the module as a TorchScript archive (atomically),
  // which torch.jit.load opens; every rank learns the outcome.
  void save_module(const std::string& path, const ScriptModule& module);
  // Lightning's remove_checkpoint: global rank 0 removes `path` through the
  // checkpoint IO; every rank learns the outcome.
  void remove_checkpoint(const std::string& path);

  // Lightning's ModelCheckpoint(dirpath=dir, save_top_k=keep) with
  // Trainer.fit(ckpt_path="last"), for a job that a launcher restarts
  // (strategy/resume.cpp). save_checkpoint_to_dir writes
  // dir/epoch=E-step=S.ckpt (checkpoint_dir.h) as save_checkpoint does,
  // creating dir, then global rank 0 removes all but the newest `keep`
  // (keep <= 0: none). Returns the file's path.
  std::string save_checkpoint_to_dir(const std::string& dir, int keep, const std::vector<CheckpointModule>& modules,
                                     const TrainingObjects& objects, const CheckpointInfo& info);
  struct Resumed {
    bool resumed = false;                 // false: no checkpoint in dir on rank 0; nothing changed
    std::string path;                     // the file every rank loaded
    CheckpointInfo info;
    std::vector<std::string> passed_over; // newer files not every rank had or could load, each with why
  };
  // Loads the newest checkpoint in `dir` that every rank has and can load
  // (load_checkpoint), agreed among the ranks, not assumed: rank 0's list
  // is the candidates, a file some rank lacks or cannot load is passed
  // over for the next older. Status::IO when rank 0 has checkpoints but
  // none of them loads on every rank (named with each reason).
  Resumed resume_from_dir(const std::string& dir, const std::vector<CheckpointModule>& modules,
                          const TrainingObjects& objects);

  // PyTorch's Join for uneven inputs (the option ddp.join_enabled): this
  // rank has no more batches; it shadows the others' steps until every
  // rank has joined, then every rank takes the model of the rank that
  // joined last. Collective over the ranks that are still training.
  void join();

  // Whether the requeue signal reached any rank (SLURM's warning before the
  // time limit): a collective decision, so that every rank saves and stops
  // at the same step. False outside SLURM or without the signal.
  bool requeue_requested();
  // Global rank 0 asks SLURM to requeue the job (scontrol requeue, the
  // array task's id or SLURM_JOB_ID, as Lightning); every rank learns the
  // outcome (Status::IO naming the failure on every rank).
  void requeue();

  // Undoes setup: the engine, the averager, the group, and (when this
  // process started the other local ranks) waits up to the timeout for them
  // to end; Status::WorkerFailed names one that failed. A later
  // setup_environment starts again.
  void teardown();
  // Whether a call of this strategy is running now, one that may run the
  // caller's code (a comm hook in backward, an optimizer closure, a
  // checkpoint_io callback): that code may not tear the strategy down or
  // destroy it, which the running call would outlive.
  bool running_a_call() const { return running_ > 0; }
  // Status::State naming `call` while one runs (for teardown, and for the C
  // layer before it lets go of what teardown would).
  void refuse_while_running(const char* call) const;

 private:
  // Drops the group and everything built on it (DDP wrappers, sync
  // batchnorm, the averager, the host cache); the launcher is left.
  void release_group();
  void require_setup(const char* what) const;
  bool forward_syncs_buffers() const;
  // The part of forward before the module runs: Join's count, the buffers.
  void pre_forward(ScriptModule& module);
  // The parameters of every module set up (what clipping and the scaler see).
  std::vector<at::Tensor> all_parameters() const;
  // PyTorch's DDP._find_common_rank: the highest rank with `candidate` set. Collective.
  int common_rank(bool candidate);
  // `group`, or the strategy's for nullptr; refuses a group of another job.
  const std::shared_ptr<Group>& group_or_own(const std::shared_ptr<Group>& group, const char* what) const;
  // The comm hook's state of every rank, as a list, on global rank 0
  // (None elsewhere, and for a hook that keeps none). Collective.
  c10::IValue gather_hook_states();
  // `mine` from every rank, as a list on global rank 0 (None elsewhere). Collective.
  c10::IValue gather_rank_states(const c10::IValue& mine, const std::string& what);
  // This rank's entry of a checkpoint's hook states (None: start afresh).
  c10::IValue this_ranks_hook_state(const c10::IValue& saved) const;
  // Runs a collective step; when a peer failed and this process started
  // it, the status names that rank (Lightning's on_exception).
  template <typename F>
  auto naming_failed_rank(F&& step) -> decltype(step());

  // Runs `io` on global rank 0 only; its failure reaches every rank as
  // Status::IO: "<what>: global rank 0 could not <verb>: <reason>".
  void on_rank_zero(const std::string& what, const std::string& verb, const std::function<void()>& io);
  // naming_failed_rank for code outside ddp_strategy.cpp.
  void run_collective(const std::function<void()>& step);
  // devices "auto" for `env`, checked against it.
  int devices_for(const ClusterEnv& env, bool launched) const;

  // Calls running now (running_a_call), counted by Running.
  int running_ = 0;
  struct Running {
    int& count;
    explicit Running(int& c) : count(c) { ++count; }
    ~Running() { --count; }
  };

  StrategyOptions opts_;
  int devices_ = 0;
  std::unique_ptr<PrecisionPlugin> precision_;
  ClusterEnv env_;
  std::shared_ptr<Group> group_;
  // The options named no checkpoint IO: checkpoints are local files, which
  // a checkpoint directory needs (it lists them).
  bool local_checkpoint_files_ = false;
  // The modules set up, each with its own engine over its parameters that
  // require grad (the averager's, with one module).
  struct WrappedModule {
    const ScriptModule* module = nullptr;
    std::vector<at::Tensor> params;
    std::unique_ptr<Reducer> reducer;
  };
  std::vector<WrappedModule> wrapped_;
  bool sync_enabled_ = true;  // block_backward_sync off
  std::unique_ptr<ModelAverager> averager_;
  std::unique_ptr<PopenLauncher> launcher_;
  std::unique_ptr<HostCacheUse> host_cache_;
  std::unique_ptr<RequeueSignal> requeue_signal_;
  std::shared_ptr<void> forward_context_;  // forward_begin to forward_end  // under SLURM, from setup_environment to teardown
  std::unique_ptr<SyncBatchNormBinding> sync_batchnorm_;  // from setup_module to teardown
  int sync_batchnorm_layers_ = 0;  // CPU accelerator: from setup_environment to teardown
};

}  // namespace ddp::core
