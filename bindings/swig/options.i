/*
 * The option structs of the C API as classes (StrategyOptions,
 * ReducerOptions, SgdOptions, AdamOptions, SamplerOptions,
 * LrSchedulerOptions, CheckpointInfo): every field is a property (Python)
 * or a getter/setter pair (Java), and a new object holds the C API's
 * defaults (its *_INIT). SWIG sees the fields declared here; the compiler
 * checks them against the real headers, so a renamed field fails the build.
 * The version fields stay hidden: the binding is built with the headers it
 * declares. Fields that hold callbacks or borrowed arrays (cluster callbacks,
 * checkpoint IO, milestones, user bytes) are left to the C API.
 */

%rename(StrategyKind) ddp_strategy_kind;
%rename(DeviceType) ddp_device_type;
%rename(ClipAlgorithm) ddp_clip_algorithm;
%rename(LrSchedulerKind) ddp_lr_scheduler_kind;
typedef enum ddp_strategy_kind { DDP_STRATEGY_DDP = 0, DDP_STRATEGY_DDP_SPAWN = 1, DDP_STRATEGY_DDP_FORK = 2 } ddp_strategy_kind;
typedef enum ddp_device_type { DDP_DEVICE_CPU = 0, DDP_DEVICE_CUDA = 1 } ddp_device_type;
typedef enum ddp_clip_algorithm { DDP_CLIP_NORM = 0, DDP_CLIP_VALUE = 1 } ddp_clip_algorithm;
typedef enum ddp_lr_scheduler_kind {
  DDP_LR_STEP = 0, DDP_LR_MULTI_STEP = 1, DDP_LR_EXPONENTIAL = 2, DDP_LR_COSINE_ANNEALING = 3, DDP_LR_LINEAR = 4,
  DDP_LR_ONE_CYCLE = 5, DDP_LR_REDUCE_ON_PLATEAU = 6
} ddp_lr_scheduler_kind;

/* The strings are the object's own copies (SWIG's setter for a char *
 * field frees the previous one); the destructor frees the last. */
%rename(StrategyOptions) ddp_strategy_options;
typedef struct ddp_strategy_options {
  ddp_strategy_kind kind;
  ddp_device_type accelerator;
  int devices;
  char *backend;
  long long timeout_ms;
  double bucket_cap_mb;
  double first_bucket_mb;
  int find_unused_parameters;
  int broadcast_buffers;
  const DdpCommHook *comm_hook; /* the strategy takes its own reference when it is made */
  long long model_averaging_period;
  long long model_averaging_warmup;
  int sync_batchnorm;
  int static_graph;
  int gradient_as_bucket_view;
  char *precision;
  double gradient_clip_val;
  ddp_clip_algorithm gradient_clip_algorithm;
  char *state_dict_prefix;
  int requeue_signal;
  int join_enabled;
  int divide_by_initial_world_size;
} ddp_strategy_options;
%extend ddp_strategy_options {
  ddp_strategy_options() {
    ddp_strategy_options *o = (ddp_strategy_options *)malloc(sizeof *o);
    if (o) {
      ddp_strategy_options init = DDP_STRATEGY_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  ~ddp_strategy_options() {
    free((char *)$self->backend);
    free((char *)$self->precision);
    free((char *)$self->state_dict_prefix);
    free($self);
  }
}

%rename(ReducerOptions) ddp_reducer_options;
typedef struct ddp_reducer_options {
  double bucket_cap_mb;
  double first_bucket_mb;
  int find_unused_parameters;
  int gradient_as_bucket_view;
  int broadcast_parameters;
  int join_enabled;
  int static_graph;
} ddp_reducer_options;
%extend ddp_reducer_options {
  /* The C defaults but broadcast_parameters 0: the binding's reducers are
   * over gradient buffers, with no parameters to broadcast. */
  ddp_reducer_options() {
    ddp_reducer_options *o = (ddp_reducer_options *)malloc(sizeof *o);
    if (o) {
      ddp_reducer_options init = DDP_REDUCER_OPTIONS_INIT;
      *o = init;
      o->broadcast_parameters = 0;
    }
    return o;
  }
  ~ddp_reducer_options() { free($self); }
}

%rename(SgdOptions) ddp_sgd_options;
typedef struct ddp_sgd_options {
  double lr;
  double momentum;
  double dampening;
  double weight_decay;
  int nesterov;
} ddp_sgd_options;
%extend ddp_sgd_options {
  ddp_sgd_options() {
    ddp_sgd_options *o = (ddp_sgd_options *)malloc(sizeof *o);
    if (o) {
      ddp_sgd_options init = DDP_SGD_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  ~ddp_sgd_options() { free($self); }
}

/* Adam's defaults; AdamOptions.adamw() makes AdamW's (weight decay 0.01). */
%rename(AdamOptions) ddp_adam_options;
typedef struct ddp_adam_options {
  double lr;
  double beta1;
  double beta2;
  double eps;
  double weight_decay;
  int amsgrad;
} ddp_adam_options;
%newobject ddp_adam_options::adamw;
%extend ddp_adam_options {
  ddp_adam_options() {
    ddp_adam_options *o = (ddp_adam_options *)malloc(sizeof *o);
    if (o) {
      ddp_adam_options init = DDP_ADAM_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  /* AdamW's defaults (weight decay 0.01). */
  static ddp_adam_options *adamw() {
    ddp_adam_options *o = (ddp_adam_options *)malloc(sizeof *o);
    if (o) {
      ddp_adam_options init = DDP_ADAMW_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  ~ddp_adam_options() { free($self); }
}

%rename(SamplerOptions) ddp_sampler_options;
typedef struct ddp_sampler_options {
  int shuffle;
  long long seed;
  int drop_last;
  int unrepeated;
  long long start;
} ddp_sampler_options;
%extend ddp_sampler_options {
  ddp_sampler_options() {
    ddp_sampler_options *o = (ddp_sampler_options *)malloc(sizeof *o);
    if (o) {
      ddp_sampler_options init = DDP_SAMPLER_OPTIONS_INIT;
      *o = init;
    }
    return o;
  }
  ~ddp_sampler_options() { free($self); }
}

%rename(LrSchedulerOptions) ddp_lr_scheduler_options;
typedef struct ddp_lr_scheduler_options {
  ddp_lr_scheduler_kind kind;
  long long step_size;
  double gamma;
  long long t_max;
  double eta_min;
  double start_factor;
  double end_factor;
  long long total_iters;
  double max_lr;
  long long total_steps;
  double pct_start;
  int anneal_linear;
  int cycle_momentum;
  double base_momentum;
  double max_momentum;
  double div_factor;
  double final_div_factor;
  int three_phase;
  int mode_max;
  double factor;
  long long patience;
  double threshold;
  int threshold_abs;
  long long cooldown;
  double min_lr;
  double eps;
} ddp_lr_scheduler_options;
%extend ddp_lr_scheduler_options {
  /* PyTorch's defaults for the scheduler of this kind. */
  ddp_lr_scheduler_options(ddp_lr_scheduler_kind kind) {
    ddp_lr_scheduler_options *o = (ddp_lr_scheduler_options *)malloc(sizeof *o);
    if (o) {
      ddp_lr_scheduler_options init = DDP_LR_SCHEDULER_OPTIONS_INIT(kind);
      *o = init;
    }
    return o;
  }
  ~ddp_lr_scheduler_options() { free($self); }
}

/* What a checkpoint records besides the states (Lightning's counters). */
%rename(CheckpointInfo) ddp_checkpoint_info;
typedef struct ddp_checkpoint_info {
  long long step;
  long long epoch;
  long long batches_in_epoch;
  long long samples_in_epoch;
  long long world_size;
} ddp_checkpoint_info;
%extend ddp_checkpoint_info {
  ddp_checkpoint_info() {
    ddp_checkpoint_info *o = (ddp_checkpoint_info *)malloc(sizeof *o);
    if (o) {
      ddp_checkpoint_info init = DDP_CHECKPOINT_INFO_INIT;
      *o = init;
    }
    return o;
  }
  ~ddp_checkpoint_info() { free($self); }
}
