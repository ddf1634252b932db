/**
 * @file strategy.h
 * @brief Lightning's DDPStrategy from C: the environment and the group, the
 *        rank facts, the model placed and wrapped with the DDP engine,
 *        backward and the optimizer step, gradient-sync blocking, the
 *        collectives, checkpoints and teardown, in Lightning's order.
 *
 * A training program:
 * @code
 *   ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
 *   ddp_strategy *s; ddp_strategy_new(&s, &o);
 *   ddp_strategy_setup_environment(s);            // joins the group
 *   ddp_module *m; ddp_module_load(&m, "mlp.pt");
 *   ddp_strategy_setup_module(s, m);              // rank 0's weights, DDP hooks
 *   ddp_optimizer *opt; ddp_optimizer_new_sgd(&opt, m, &sgd);
 *   for each batch of this rank (see sampler.h):
 *     ddp_strategy_forward(s, m, x, &logits);
 *     ddp_loss_cross_entropy(logits, y, &loss);
 *     ddp_optimizer_zero_grad(opt);                // (before backward)
 *     ddp_strategy_backward(s, loss);              // gradients averaged over ranks
 *     ddp_strategy_optimizer_step(s, opt);
 *   ddp_strategy_save_checkpoint(s, "last.ckpt", m, opt, step, epoch, NULL, 0);
 *   ddp_strategy_teardown(s);
 * @endcode
 *
 * Start methods, as Lightning's launchers: with DDP_STRATEGY_DDP (popen, the
 * default), setup_environment reads the environment of a launcher that
 * started the ranks (ddprun, torchrun, SLURM, ...); when there is none and
 * devices > 1, this process becomes local rank 0 and starts the program
 * again, with the same arguments and from the directory it started in,
 * for local ranks 1..devices-1, which find that environment and start
 * nothing (so the code before setup_environment runs in every rank). Teardown waits for them (at most the timeout) and
 * names one that failed (DDP_E_WORKER_FAILED). With DDP_STRATEGY_DDP_SPAWN /
 * _FORK the program runs its training function through ddp_spawn
 * (launch.h), whose workers have a launcher's environment, and rank 0's
 * result comes back to the caller.
 *
 * Every collective call here is collective over the strategy's group: every
 * rank makes the same calls in the same order. Threading: one thread at a
 * time per strategy.
 */
#ifndef DDP_STRATEGY_H
#define DDP_STRATEGY_H

#include "ddp/collectives.h"
#include "ddp/comm_hook.h"
#include "ddp/common.h"
#include "ddp/group.h"
#include "ddp/model.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** Lightning's DDPStrategy: setup, rank facts, collectives, training steps and checkpoints; freed with ddp_strategy_free. */
typedef struct ddp_strategy ddp_strategy;

/** How the ranks are started (see the file comment). */
typedef enum ddp_strategy_kind {
  DDP_STRATEGY_DDP = 0,       /**< started by a launcher (ddprun, torchrun, SLURM, ...) */
  DDP_STRATEGY_DDP_SPAWN = 1, /**< workers of ddp_spawn, DDP_START_POPEN */
  DDP_STRATEGY_DDP_FORK = 2,  /**< workers of ddp_spawn, DDP_START_FORK */
  DDP_STRATEGY_KIND_FORCE_INT = 0x7fffffff
} ddp_strategy_kind;

/** Lightning's gradient_clip_algorithm. */
typedef enum ddp_clip_algorithm {
  DDP_CLIP_NORM = 0,  /**< scale the gradients so that their total 2-norm is at most the clip value */
  DDP_CLIP_VALUE = 1, /**< clamp every gradient element into [-value, value] */
  DDP_CLIP_ALGORITHM_FORCE_INT = 0x7fffffff
} ddp_clip_algorithm;

/**
 * Lightning's ClusterEnvironment as callbacks: setup_environment calls each
 * once, in place of detecting the environment. An int callback returns the
 * value, or a negative number when it failed; main_address returns NULL when
 * it failed. Every callback is required. Each failure, and values out of
 * range, are DDP_E_INVALID_ARGUMENT naming the callback, before any rank
 * joins a group.
 */
typedef struct ddp_cluster_callbacks {
  void *user_data;                                /**< passed to every callback */
  int (*world_size)(void *user_data); /**< processes in the job */
  int (*global_rank)(void *user_data); /**< this process's rank in the job */
  int (*local_rank)(void *user_data); /**< this process's rank on its node */
  int (*local_world_size)(void *user_data);       /**< processes on this node */
  int (*node_rank)(void *user_data); /**< this node's index */
  const char *(*main_address)(void *user_data);   /**< borrowed; copied at once */
  int (*main_port)(void *user_data); /**< the rendezvous store's port (MASTER_PORT) */
} ddp_cluster_callbacks;

/** Where a load callback of ddp_checkpoint_io writes the bytes it fetched. */
typedef struct ddp_byte_sink ddp_byte_sink;

/**
 * Appends @p len bytes to @p sink (valid only during the load callback it was
 * given to: a sink kept and written to afterwards is DDP_E_INVALID_ARGUMENT).
 */
DDP_API ddp_status ddp_byte_sink_write(ddp_byte_sink *sink, const void *data, size_t len);

/**
 * Lightning's CheckpointIO: where the strategy's checkpoint bytes are stored.
 * save and remove run on global rank 0 only, load on every rank: a
 * collective call from save or remove (the strategy's barrier, any
 * collective on a group of more than one rank) is DDP_E_STATE at once,
 * since the other ranks never join it; the group stays usable. Each
 * returns 0 on success; any other value fails the call with DDP_E_IO on
 * every rank, naming the callback, the path and the value. Every callback
 * is required; the callbacks run on the calling thread.
 */
typedef struct ddp_checkpoint_io {
  void *user_data; /**< passed to every callback */
  int (*save)(void *user_data, const char *path, const void *data, size_t len); /**< stores @p len bytes under @p path, whole or not at all */
  int (*load)(void *user_data, const char *path, ddp_byte_sink *sink); /**< writes the bytes under @p path to @p sink (ddp_byte_sink_write) */
  int (*remove)(void *user_data, const char *path); /**< removes @p path */
} ddp_checkpoint_io;

/* 2 added gradient_as_bucket_view; 3 the precision, gradient clipping, the
 * caller's cluster environment and checkpoint IO, and devices 0 ("auto") as
 * the default. A caller built against an earlier version keeps working:
 * libddp reads and writes only that version's fields for it, and its
 * defaults (devices 1) are kept. */
/* 4 added state_dict_prefix; 5 requeue_signal, join_enabled and divide_by_initial_world_size. */
/** The version of ::ddp_strategy_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_STRATEGY_OPTIONS_VERSION 5

/** DDPStrategy's arguments, with Lightning's and PyTorch's defaults. Initialise with DDP_STRATEGY_OPTIONS_INIT. */
typedef struct ddp_strategy_options {
  unsigned int version;          /**< DDP_STRATEGY_OPTIONS_VERSION */
  ddp_strategy_kind kind;        /**< DDP_STRATEGY_DDP */
  ddp_device_type accelerator;   /**< DDP_DEVICE_CPU; CUDA: each rank on cuda:LOCAL_RANK */
  int devices;                   /**< 0 (auto): the launcher's processes per node; with no launcher 1 (CUDA: the visible
                                      devices). Processes on this node; DDP_STRATEGY_DDP with no launcher starts the others;
                                      a count that disagrees with a launcher's is DDP_E_INVALID_ARGUMENT naming both */
  const char *backend;           /**< NULL: "nccl" for CUDA, else "shm" (see group.h) */
  int64_t timeout_ms;            /**< 0: 1800000 (Lightning's default_pg_timeout) */
  double bucket_cap_mb;          /**< 25 */
  double first_bucket_mb;        /**< 1 */
  int find_unused_parameters;    /**< 0 */
  int broadcast_buffers;         /**< 1: rank 0's buffers before each forward, as PyTorch's DDP */
  const ddp_comm_hook *comm_hook; /**< NULL: all-reduce; borrowed by ddp_strategy_new (may be freed after); a stateful one serves one strategy's module at a time (comm_hook.h) */
  int64_t model_averaging_period; /**< 0: off; average the parameters every this many steps (required with post-local SGD) */
  int64_t model_averaging_warmup; /**< the first step that averages; 0 with a post-local SGD hook: its start_localsgd_iter */
  int sync_batchnorm;            /**< 0; 1: setup_module makes every batch norm of the module synchronised over the group
                                      (torch.nn.SyncBatchNorm's statistics, on CPU and CUDA; see ddp_strategy_setup_module) */
  int static_graph;              /**< 0; 1 is refused for now (DDP_E_UNSUPPORTED) */
  int gradient_as_bucket_view;   /**< 0; 1: each parameter's gradient is a view of its bucket, so nothing is copied out; on shm the buckets are memory every rank of the host maps, reduced where they lie (version 2) */
  /* version 3 */
  const char *precision;         /**< NULL: "32-true". Lightning's names: "bf16-mixed" (autocast to bfloat16), "16-mixed"
                                      (CUDA: autocast to float16 with a gradient scaler; on the CPU it becomes "bf16-mixed",
                                      as in Lightning, see ddp_strategy_precision_warning), "bf16-true", "16-true"
                                      (parameters and inputs cast). Copied by ddp_strategy_new */
  double gradient_clip_val;      /**< 0: off; else clip after the gradients are unscaled, before the optimizer's step */
  ddp_clip_algorithm gradient_clip_algorithm; /**< DDP_CLIP_NORM (Lightning's default) */
  const ddp_env *cluster_environment;         /**< NULL: detected; else these values (ddp_env_new, ddp_env_from_vars),
                                                   copied by ddp_strategy_new. Not together with cluster_callbacks */
  const ddp_cluster_callbacks *cluster_callbacks; /**< NULL; else called at setup_environment (the table is copied) */
  const ddp_checkpoint_io *checkpoint_io;     /**< NULL: local files written atomically; the table is copied */
  /* version 4 */
  const char *state_dict_prefix; /**< NULL: none. The LightningModule's attribute holding the model, with its dot ("net."
                                      for `self.net = model`): checkpoint state_dict names carry it, as Lightning's do, and
                                      loading takes names with or without it. Copied by ddp_strategy_new */
  /* version 5 */
  int requeue_signal;            /**< 0: SIGUSR1. Lightning's SLURM auto-requeue: under the SLURM environment this signal
                                      (sbatch --signal=USR1@90) is caught from setup_environment to teardown, and
                                      ddp_strategy_requeue_requested reports it; -1: off (the signal keeps its handler) */
  int join_enabled;              /**< 0; 1: PyTorch's Join for uneven inputs: a rank out of batches calls
                                      ddp_strategy_join. Every forward with gradients on is then followed by a
                                      backward, and one module is set up. The same on every rank */
  int divide_by_initial_world_size; /**< 1 (Join's default): gradients averaged over the world size, joined ranks
                                      counting as zeros; 0: over the ranks still training */
} ddp_strategy_options;

/** An initialiser of ::ddp_strategy_options with the defaults: `ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;` */
#define DDP_STRATEGY_OPTIONS_INIT                                                                                   \
  {DDP_STRATEGY_OPTIONS_VERSION, DDP_STRATEGY_DDP, DDP_DEVICE_CPU, 0, NULL, 0, 25.0, 1.0, 0, 1, NULL, 0, 0, 0, 0, 0, \
   NULL, 0.0, DDP_CLIP_NORM, NULL, NULL, NULL, NULL, 0, 0, 1}

/** Fills @p opts with the defaults of @p version (1 to 5; an earlier version writes only its own fields, devices 1). */
DDP_API ddp_status ddp_strategy_options_init(ddp_strategy_options *opts, unsigned int version);

/**
 * @param opts NULL for the defaults.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a bad option;
 *         DDP_E_UNSUPPORTED for an option that cannot be honoured.
 */
DDP_API ddp_status ddp_strategy_new(ddp_strategy **out, const ddp_strategy_options *opts);

/**
 * Reads this process's cluster environment and joins the group. Collective.
 *
 * With the CPU accelerator it also installs libddp's host block cache as
 * torch's CPU allocator until teardown: freed tensors of 128 KiB and more are
 * kept by size and reused, so a step does not pay the page faults of fresh
 * memory for the same activations and gradients again. The environment
 * variable DDP_HOST_CACHE_MB sets how much it may hold (default 2048; 0: no
 * cache, torch's allocator as before).
 * @return DDP_E_INVALID_ARGUMENT naming DDP_HOST_CACHE_MB when it is not a size;
 *         DDP_E_PEER_FAILED on a rank 0 that started the others (popen) when
 *         one of them ended before the group was made, naming it and how it
 *         ended (within about 100 ms, instead of waiting out the timeout).
 */
DDP_API ddp_status ddp_strategy_setup_environment(ddp_strategy *s);

/** @return the strategy's group (borrowed: valid until teardown), NULL before setup. */
DDP_API ddp_group *ddp_strategy_group(ddp_strategy *s);

/** Rank facts; before setup: rank 0 of a world of 1. -1 for an invalid handle. */
DDP_API int ddp_strategy_global_rank(const ddp_strategy *s);
/** The rank on this node (LOCAL_RANK). */
DDP_API int ddp_strategy_local_rank(const ddp_strategy *s);
/** This node's index (NODE_RANK / GROUP_RANK). */
DDP_API int ddp_strategy_node_rank(const ddp_strategy *s);
/** The number of processes in the job. */
DDP_API int ddp_strategy_world_size(const ddp_strategy *s);
/** @return 1 on global rank 0, else 0. */
DDP_API int ddp_strategy_is_global_zero(const ddp_strategy *s);
/** @return where this rank computes: the CPU, or cuda:LOCAL_RANK. */
DDP_API ddp_device ddp_strategy_root_device(const ddp_strategy *s);
/** @return the processes on this node: the option, or what "auto" became at setup; -1 for an invalid handle. */
DDP_API int ddp_strategy_devices(const ddp_strategy *s);
/** @return the precision in effect ("32-true", "bf16-mixed", ...), borrowed; "" for an invalid handle. */
DDP_API const char *ddp_strategy_precision(const ddp_strategy *s);
/** @return why the precision in effect differs from the one asked for (Lightning's warning), borrowed; "" when it does not. */
DDP_API const char *ddp_strategy_precision_warning(const ddp_strategy *s);

/**
 * Places @p m on the root device, gives every rank rank 0's parameters and
 * buffers, and wraps it with the DDP engine (autograd hooks, the comm hook,
 * the model averager). Collective. Only the parameters that require grad
 * are synchronised (frozen ones get rank 0's values once, as buffers do).
 *
 * Several modules may be set up (a GAN's generator and discriminator, a
 * teacher and a student): each gets its own engine, as each has its own
 * DistributedDataParallel in PyTorch, so a backward through some of them
 * synchronises those alone. A comm hook or model averaging follows one
 * module: a second one is then DDP_E_UNSUPPORTED; the same module twice is
 * DDP_E_STATE.
 *
 * With sync_batchnorm, every aten::batch_norm in @p m's TorchScript methods
 * (each BatchNorm1d/2d/3d of a scripted module, or one a trace recorded)
 * becomes libddp's synchronised batch norm: in training mode it normalises
 * with the mean and variance of the whole group's batch (uneven batches and
 * ranks without rows included) and moves the running statistics with the
 * global unbiased variance; in eval mode it uses the running statistics and
 * communicates nothing. Every rank must then run training forwards and
 * backwards of the same layers in the same order. After teardown the module
 * still evaluates; training it is DDP_E_STATE. A model given as tensors
 * (ddp_module_from_tensors) has no graph to rewrite: its forward calls
 * ddp_strategy_batch_norm (torch_nn.hpp's ddp::SyncBatchNorm) instead.
 */
DDP_API ddp_status ddp_strategy_setup_module(ddp_strategy *s, ddp_module *m);

/**
 * @return how many batch norms setup_module made synchronised (sync_batchnorm):
 *         0 without the option or for a module with none (nothing changes then);
 *         -1 for an invalid handle.
 */
DDP_API int ddp_strategy_sync_batchnorm_layers(const ddp_strategy *s);

/**
 * Forward of @p m on @p input (moved to the root device), in the
 * precision's context. Rank 0's buffers are broadcast first (the option
 * broadcast_buffers) when this forward's gradients will be synchronised:
 * autograd recording and backward sync not blocked, PyTorch's condition.
 * So under ddp_grad_set_enabled(0) (evaluation, prediction) a forward is
 * not a collective, and ranks may run different numbers of batches.
 * (PyTorch decides from the previous forward's state, so its first no-grad
 * forward after training still broadcasts; libddp decides from the call's.)
 */
DDP_API ddp_status ddp_strategy_forward(ddp_strategy *s, ddp_module *m, const ddp_tensor *input, ddp_tensor **out);

/**
 * ddp_strategy_forward for any method of the module (NULL: "forward") with
 * several inputs and a tensor, tuple, list or string-keyed dict output (see
 * ddp_module_call for the errors).
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_strategy_call(ddp_strategy *s, ddp_module *m, const char *method, const ddp_tensor *const *inputs,
                                     size_t num_inputs, ddp_outputs **out);

/** ddp_strategy_call with keyword inputs too (see ddp_module_call_v2). */
DDP_API ddp_status ddp_strategy_call_v2(ddp_strategy *s, ddp_module *m, const char *method,
                                        const ddp_tensor *const *inputs, size_t num_inputs,
                                        const char *const *kw_names, const ddp_tensor *const *kw_values,
                                        size_t num_kw, ddp_outputs **out);

/**
 * For a model whose forward the caller runs itself (ddp_module_from_tensors):
 * forward_begin does what ddp_strategy_forward does before running a module
 * (Join's count, rank 0's buffers broadcast into the caller's buffers when
 * the forward's gradients will be synchronised) and enters the precision's
 * context on this thread (autocast for "bf16-mixed" and "16-mixed"; the
 * output is the caller's to cast to float32 before the loss, as Lightning
 * does); forward_end leaves it.
 * @code
 *   ddp_strategy_forward_begin(s, m);
 *   at::Tensor out = net->forward(x);             // the caller's own forward
 *   ddp_strategy_forward_end(s);
 *   at::Tensor loss = torch::mse_loss(out.to(torch::kFloat), y);
 *   ddp_tensor_from_aten(&l, &loss); ddp_strategy_backward(s, l);
 *   ddp_strategy_optimizer_step_fn(s, step, &opt, NULL);  // the caller's optimizer
 * @endcode
 * @return DDP_E_STATE for a second begin before end, or an end without begin.
 */
DDP_API ddp_status ddp_strategy_forward_begin(ddp_strategy *s, ddp_module *m);
/** Ends the forward ddp_strategy_forward_begin began (see there). */
DDP_API ddp_status ddp_strategy_forward_end(ddp_strategy *s);

/**
 * ddp_strategy_optimizer_step for the caller's own optimizer: the
 * precision's step (unscale, clip, and @p step called unless the gradient
 * scaler found an inf or NaN) over the parameters of the modules set up,
 * then the model averager's. @p step returns 0, else the call fails with
 * DDP_E_INVALID_ARGUMENT naming the value.
 * @param[out] stepped may be NULL: 1 when @p step ran.
 */
DDP_API ddp_status ddp_strategy_optimizer_step_fn(ddp_strategy *s, int (*step)(void *user_data), void *user_data,
                                                  int *stepped);

/**
 * sync_batchnorm for a model whose forward the caller runs (torch.hpp's
 * ddp::SyncBatchNorm calls it): with @p training, batch_norm of @p input
 * (N, C, ...) normalised with the mean and variance of the global batch over
 * the strategy's group, as torch.nn.SyncBatchNorm (uneven per-rank batches
 * and ranks with no rows included; the running statistics move with the
 * unbiased global variance; the backward reduces SyncBatchNorm's two sums),
 * on the CPU as on CUDA. Collective in the forward and in the backward: every
 * rank calls it for the same layers in the same order. Without @p training,
 * plain batch_norm with the running statistics and no collective.
 * Gradients flow to @p input, @p weight and @p bias.
 * @param weight,bias,running_mean,running_var (C) each, or NULL; the running
 *        statistics are updated in place.
 * @param[out] out new reference; NULL on error.
 * @return DDP_E_STATE when training before setup_environment;
 *         DDP_E_INVALID_ARGUMENT for shapes that do not fit (named), or
 *         one value per channel over the whole group.
 */
DDP_API ddp_status ddp_strategy_batch_norm(ddp_strategy *s, const ddp_tensor *input, const ddp_tensor *weight,
                                          const ddp_tensor *bias, ddp_tensor *running_mean, ddp_tensor *running_var,
                                          int training, double momentum, double eps, ddp_tensor **out);

/** loss.backward(): the gradients are averaged over the ranks as they become ready. Collective. */
DDP_API ddp_status ddp_strategy_backward(ddp_strategy *s, const ddp_tensor *loss);

/**
 * The precision's step, then the model averager's when configured: the
 * gradients are unscaled (16-mixed), clipped (gradient_clip_val), and the
 * optimizer steps unless the gradient scaler found an inf or NaN in them
 * (then the step is skipped and the scale backs off, as torch.amp.GradScaler).
 */
DDP_API ddp_status ddp_strategy_optimizer_step(ddp_strategy *s, ddp_optimizer *opt);
/** The same; @p stepped (may be NULL) is 1 when the optimizer stepped, 0 when the scaler skipped it. */
DDP_API ddp_status ddp_strategy_optimizer_step_v2(ddp_strategy *s, ddp_optimizer *opt, int *stepped);

/** Lightning's block_backward_sync (no_sync): while on, gradients accumulate locally. */
DDP_API ddp_status ddp_strategy_block_backward_sync(ddp_strategy *s, int on);

/** Lightning's barrier(name); @p name is for messages only (may be NULL). */
DDP_API ddp_status ddp_strategy_barrier(ddp_strategy *s, const char *name);

/** Lightning's reduce: in place over the group, DDP_MEAN by default (pass DDP_MEAN). */
DDP_API ddp_status ddp_strategy_reduce(ddp_strategy *s, ddp_tensor *t, ddp_reduce_op op);

/**
 * Lightning's broadcast (of bytes, never pickle), all_gather (same shape on
 * every rank; the result is world x shape), all_gather of different shapes
 * (gather_all_tensors: @p out receives world_size tensors) and
 * reduce_boolean_decision, over the strategy's group: the collectives of
 * collectives.h on ddp_strategy_group(s). DDP_E_STATE before setup.
 */
DDP_API ddp_status ddp_strategy_broadcast_bytes(ddp_strategy *s, const void *data, size_t len, int src,
                                                ddp_buffer **out);
/** Lightning's all_gather: every rank's @p in stacked along a new first dimension (the group's all_gather). */
DDP_API ddp_status ddp_strategy_all_gather(ddp_strategy *s, const ddp_tensor *in, ddp_tensor **out);
/** Lightning's gather_all_tensors: one tensor per rank, first dimensions may differ (ddp_all_gather_uneven). */
DDP_API ddp_status ddp_strategy_all_gather_uneven(ddp_strategy *s, const ddp_tensor *in, ddp_tensor **out);
/** Lightning's reduce_boolean_decision: *out is 1 when every rank's decision is true (@p all 1) or any is (@p all 0). */
DDP_API ddp_status ddp_strategy_reduce_boolean_decision(ddp_strategy *s, int decision, int all, int *out);

/**
 * Lightning's all_gather(tensor, sync_grads): world x shape. With
 * @p sync_grads = 1 and an input that requires grad (a module's output),
 * the result has a backward that gives each rank the sum over the ranks of
 * the gradient of its own slice (Lightning's AllGatherGrad), so a loss over
 * the whole gathered batch trains every rank. That backward is collective:
 * every rank must run backward through its result. @p out: new reference.
 */
DDP_API ddp_status ddp_strategy_all_gather_v2(ddp_strategy *s, const ddp_tensor *in, int sync_grads, ddp_tensor **out);

/**
 * Lightning's reduce(tensor, group=..., reduce_op=...) and all_gather(
 * tensor, group=..., sync_grads=...) over @p group: NULL for the strategy's
 * own, or a subgroup of its job (ddp_group_new_subgroups on
 * ddp_strategy_group(s)); the result then has @p group's size. Every rank
 * of @p group makes the call.
 * @return DDP_E_INVALID_ARGUMENT for a group of another job (a group made by
 *         another ddp_group_init), before any communication.
 */
DDP_API ddp_status ddp_strategy_reduce_v2(ddp_strategy *s, ddp_tensor *t, ddp_reduce_op op, ddp_group *group);
/** ddp_strategy_all_gather_v2 over @p group (NULL: the strategy's own), as ddp_strategy_reduce_v2. */
DDP_API ddp_status ddp_strategy_all_gather_v3(ddp_strategy *s, const ddp_tensor *in, int sync_grads, ddp_group *group,
                                             ddp_tensor **out);

/* 2 added samples_in_epoch and world_size; a version 1 caller is served within its own struct. */
/** The version of ::ddp_checkpoint_info this header declares (its first field; the _INIT macro sets it). */
#define DDP_CHECKPOINT_INFO_VERSION 2

/** The counters a checkpoint carries beside the state. Initialise with DDP_CHECKPOINT_INFO_INIT (also before a load:
 *  its version says how much a load may write). */
typedef struct ddp_checkpoint_info {
  unsigned int version;     /**< DDP_CHECKPOINT_INFO_VERSION */
  int64_t step;             /**< optimizer steps taken (Lightning's global_step) */
  int64_t epoch;            /**< epochs completed (Lightning's epoch; a resumed run starts this epoch) */
  int64_t batches_in_epoch; /**< batches per epoch (the fit loop's progress Lightning resumes from); 0: step / epoch */
  const void *user;         /**< the caller's own bytes (may be NULL with user_len 0); borrowed for the call */
  size_t user_len; /**< the user bytes' length */
  /* version 2 */
  int64_t samples_in_epoch; /**< a checkpoint inside an epoch: entries of the epoch's sampler list trained on over
                                 every rank (the sampler options' start of the resumed epoch); 0 at an epoch's end */
  int64_t world_size;       /**< on load, the world size of the job that saved it (0: a file without it); a save
                                 writes the strategy's own and ignores this */
} ddp_checkpoint_info;

/** An initialiser of ::ddp_checkpoint_info with the defaults: `ddp_checkpoint_info o = DDP_CHECKPOINT_INFO_INIT;` */
#define DDP_CHECKPOINT_INFO_INIT {DDP_CHECKPOINT_INFO_VERSION, 0, 0, 0, NULL, 0, 0, 0}

/**
 * Global rank 0 writes a checkpoint to @p path: a torch.save-format file
 * (torch.load(path, weights_only=True) opens it) in Lightning's layout, which
 * Trainer.fit(ckpt_path=path) resumes: epoch, global_step, the module's
 * state_dict (names with the options' state_dict_prefix), the fit loop's
 * progress, optimizer_states (torch.optim's layout), lr_schedulers
 * (torch.optim.lr_scheduler's), the gradient scaler's state (16-mixed) and
 * the user bytes under "libddp". Streamed to a temporary file and renamed
 * (or handed to the options' checkpoint_io), so that a crash leaves the
 * previous file or the new one; through a symbolic link the file it leads
 * to is written (as torch.save writes), and a path that names or leads to a
 * directory, device or FIFO is DDP_E_IO (the rename would replace it: as
 * root, /dev/null itself), and so is a file the caller may not write (a
 * read-only one, as torch.save refuses it). A file saved over keeps its
 * mode. Collective: every rank waits until it is
 * written, and when rank 0 cannot write, every rank gets DDP_E_IO with rank
 * 0's reason.
 * @param opts,scheds the optimizers and schedulers in Lightning's order (each
 *        array may be NULL with its count 0); borrowed for the call.
 * @param info NULL: all counters 0, no user bytes.
 * @return DDP_E_INVALID_ARGUMENT naming a negative counter of @p info, or an
 *         epoch times batches_in_epoch (the fit loop's batch count) past int64.
 */
DDP_API ddp_status ddp_strategy_save_checkpoint_v2(ddp_strategy *s, const char *path, const ddp_module *m,
                                                   ddp_optimizer *const *opts, size_t num_opts,
                                                   ddp_lr_scheduler *const *scheds, size_t num_scheds,
                                                   const ddp_checkpoint_info *info);

/**
 * Every rank reads @p path (written by libddp, or by Lightning or torch.save
 * in Lightning's layout; libddp's earlier DDPCKPT files too) into @p m, the
 * optimizers and the schedulers. Only tensors, containers, numbers and
 * strings are read; a file naming any other Python global is DDP_E_IO naming
 * it, and nothing in a file is ever run. Collective: a truncated, foreign or
 * damaged file, one of another model (a missing or mis-shaped entry, named),
 * or a different number of optimizers or schedulers, on any rank, is DDP_E_IO
 * with a message on every rank, and leaves everything untouched on every
 * rank. A file without optimizer (scheduler) states leaves those as they are;
 * none given (count 0) loads the module alone (weights only, to fine-tune).
 * @param[out] info may be NULL; its user field is left NULL (see @p user).
 * @param[out] user the user bytes, new reference (may be NULL).
 */
DDP_API ddp_status ddp_strategy_load_checkpoint_v2(ddp_strategy *s, const char *path, ddp_module *m,
                                                   ddp_optimizer *const *opts, size_t num_opts,
                                                   ddp_lr_scheduler *const *scheds, size_t num_scheds,
                                                   ddp_checkpoint_info *info, ddp_buffer **user);

/**
 * ddp_strategy_save_checkpoint_v2 with several modules in the one
 * state_dict, as a LightningModule holding them keeps them: module i's
 * entries under @p prefixes[i] (its attribute with the dot: "generator.",
 * "discriminator."). Lightning resumes it into a LightningModule with those
 * attributes.
 * @param prefixes distinct; NULL: one module under the options' state_dict_prefix.
 * @return DDP_E_INVALID_ARGUMENT naming a repeated prefix, or NULL prefixes with several modules.
 */
DDP_API ddp_status ddp_strategy_save_checkpoint_v3(ddp_strategy *s, const char *path, ddp_module *const *modules,
                                                   const char *const *prefixes, size_t num_modules,
                                                   ddp_optimizer *const *opts, size_t num_opts,
                                                   ddp_lr_scheduler *const *scheds, size_t num_scheds,
                                                   const ddp_checkpoint_info *info);

/** ddp_strategy_load_checkpoint_v2 for the modules of ddp_strategy_save_checkpoint_v3, each from its prefix's entries. */
DDP_API ddp_status ddp_strategy_load_checkpoint_v3(ddp_strategy *s, const char *path, ddp_module *const *modules,
                                                   const char *const *prefixes, size_t num_modules,
                                                   ddp_optimizer *const *opts, size_t num_opts,
                                                   ddp_lr_scheduler *const *scheds, size_t num_scheds,
                                                   ddp_checkpoint_info *info, ddp_buffer **user);

/**
 * Lightning's ModelCheckpoint(dirpath=dir, save_top_k=keep_last), for a job
 * that resumes by itself after a restart (see ddp_strategy_resume_from_dir):
 * ddp_strategy_save_checkpoint_v3 to `dir/epoch=E-step=S.ckpt` (E and S
 * from @p info, Lightning's default file name), creating @p dir; then global
 * rank 0 removes all but the newest @p keep_last checkpoints there and the
 * temporaries of writers no longer running. A file is only ever renamed
 * into place whole, so a crash at any moment leaves no torn checkpoint
 * under a checkpoint's name. Call it every N steps or at each epoch's end
 * (for a checkpoint inside an epoch set info->samples_in_epoch). Local
 * files only.
 * @param keep_last the newest checkpoints kept; 0 keeps every one.
 * @return as ddp_strategy_save_checkpoint_v3; DDP_E_INVALID_ARGUMENT for a
 *         NULL or empty @p dir or a negative @p keep_last; DDP_E_UNSUPPORTED
 *         when the options name a checkpoint_io (a directory is listed).
 */
DDP_API ddp_status ddp_strategy_save_checkpoint_to_dir(ddp_strategy *s, const char *dir, int keep_last,
                                                       ddp_module *const *modules, const char *const *prefixes,
                                                       size_t num_modules, ddp_optimizer *const *opts,
                                                       size_t num_opts, ddp_lr_scheduler *const *scheds,
                                                       size_t num_scheds, const ddp_checkpoint_info *info);

/**
 * Lightning's Trainer.fit(ckpt_path="last"): the one call a restarted job
 * makes after setting up its modules, optimizers and schedulers. Collective.
 * Every rank loads the newest checkpoint in @p dir that every rank has and
 * can load, which the ranks agree on, not assume: global rank 0's
 * checkpoints (its newest 64) are the candidates, and one that some rank
 * lacks (a directory not shared, a file not yet visible) or cannot load
 * (damaged, another model) is passed over for the next older. What it
 * restores is what ddp_strategy_load_checkpoint_v3 restores; the caller's
 * loop continues from @p info: epoch and step, and inside an epoch
 * samples_in_epoch as the sampler options' start, which also re-shards the
 * rest of the epoch when world_size differs from the job's (then each
 * remaining sample is still seen once, but batches are made of other
 * samples than the unstopped run's, so losses are not the same; with the
 * same world size they are). Each rank's CPU random stream (torch's
 * default generator: dropout, randn) is restored as it was saved, so a
 * resumed run draws what the unstopped one drew (a rank beyond the saving
 * world keeps its own); CUDA generators and the caller's own streams are
 * not (keep them in the user bytes). ddp_strategy_load_checkpoint_v3 leaves
 * the random stream alone.
 * @param[out] resumed 1 when a checkpoint was loaded; 0 when rank 0 has none
 *        in @p dir (a first start), with nothing changed.
 * @param[out] info may be NULL; as ddp_strategy_load_checkpoint_v3's (left as it is when nothing was loaded).
 * @param[out] user may be NULL; the user bytes, new reference (NULL when nothing was loaded).
 * @param[out] report may be NULL; new reference: UTF-8 lines, "resumed from PATH" and, before it,
 *        "passed over PATH: why" for each newer file not taken.
 * @return DDP_E_IO on every rank when rank 0 has checkpoints but none loads
 *         on every rank, naming each and why; DDP_E_UNSUPPORTED when the
 *         options name a checkpoint_io.
 */
DDP_API ddp_status ddp_strategy_resume_from_dir(ddp_strategy *s, const char *dir, ddp_module *const *modules,
                                                const char *const *prefixes, size_t num_modules,
                                                ddp_optimizer *const *opts, size_t num_opts,
                                                ddp_lr_scheduler *const *scheds, size_t num_scheds, int *resumed,
                                                ddp_checkpoint_info *info, ddp_buffer **user, ddp_buffer **report);

/** ddp_strategy_save_checkpoint_v2 with one optimizer (may be NULL) and no scheduler. */
DDP_API ddp_status ddp_strategy_save_checkpoint(ddp_strategy *s, const char *path, const ddp_module *m,
                                                const ddp_optimizer *opt, int64_t step, int64_t epoch,
                                                const void *user, size_t user_len);

/** ddp_strategy_load_checkpoint_v2 with one optimizer (may be NULL) and no scheduler. */
DDP_API ddp_status ddp_strategy_load_checkpoint(ddp_strategy *s, const char *path, ddp_module *m, ddp_optimizer *opt,
                                                int64_t *step, int64_t *epoch, ddp_buffer **user);

/**
 * Global rank 0 writes @p m as a TorchScript archive with its current
 * weights to @p path, atomically: torch.jit.load opens it and its forward
 * gives libddp's outputs (a module set up with sync_batchnorm is written as
 * loaded, with plain batch norms). Collective: a failure is DDP_E_IO naming
 * rank 0's reason on every rank. Without a strategy: ddp_module_save.
 */
DDP_API ddp_status ddp_strategy_save_module(ddp_strategy *s, const char *path, const ddp_module *m);

/**
 * Lightning's remove_checkpoint: global rank 0 removes @p path through the
 * checkpoint IO (a missing local file is not an error). Collective: a
 * failure is DDP_E_IO on every rank.
 */
DDP_API ddp_status ddp_strategy_remove_checkpoint(ddp_strategy *s, const char *path);

/**
 * PyTorch's Join (the option join_enabled): this rank has no more batches.
 * It shadows the steps the other ranks still take (their count of ranks
 * training, their buffer broadcast, their gradient all-reduces, with zeros
 * from here) until every rank has called it; then every rank takes the
 * parameters and buffers of the rank that joined last (the highest, when
 * several), as Join's post hook does, and the call returns. Every rank
 * calls it once, after its last step.
 * @return DDP_E_STATE without join_enabled, or with other than one module.
 */
DDP_API ddp_status ddp_strategy_join(ddp_strategy *s);

/**
 * Whether SLURM's requeue signal (the option requeue_signal) reached any
 * rank: collective, so every rank sees the same answer at the same step.
 * Lightning's handling, from C:
 * @code
 *   int requeue = 0;
 *   ddp_strategy_requeue_requested(s, &requeue);   // e.g. after each step
 *   if (requeue) {
 *     ddp_strategy_save_checkpoint_v2(s, "hpc_ckpt.ckpt", ...);
 *     ddp_strategy_requeue(s);                      // scontrol requeue
 *     break;                                        // the requeued job resumes from it
 *   }
 * @endcode
 * @param[out] out 1 when it came, else 0 (always 0 outside SLURM or with requeue_signal -1).
 */
DDP_API ddp_status ddp_strategy_requeue_requested(ddp_strategy *s, int *out);

/**
 * Global rank 0 runs `scontrol requeue <job>` (the job id Lightning uses:
 * SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for an array task, else
 * SLURM_JOB_ID), waiting at most a minute. Collective: a failure (no
 * scontrol, its exit status, no job id) is DDP_E_IO naming it on every rank.
 */
DDP_API ddp_status ddp_strategy_requeue(ddp_strategy *s);

/**
 * Undoes setup (the engine, the group, the host cache); a later
 * setup_environment starts again. From code that a call of this strategy
 * runs (a comm hook, an optimizer closure, a checkpoint_io callback) it is
 * DDP_E_STATE: that call still uses what it would undo.
 */
DDP_API ddp_status ddp_strategy_teardown(ddp_strategy *s);

/**
 * Frees @p s, tearing it down; NULL is accepted. As ddp_strategy_teardown
 * does, a rank 0 whose strategy started the other ranks (the popen launcher)
 * waits up to the strategy's timeout for them to end before it stops them;
 * a failure among them is printed, as there is no status to return. From
 * code that a call of this strategy runs (see ddp_strategy_teardown) it
 * frees nothing and says so in ddp_last_error_message().
 */
DDP_API void ddp_strategy_free(ddp_strategy *s);

DDP_EXTERN_C_END

#endif /* DDP_STRATEGY_H */
