/*
 * The training surface of the C API (ops.h, seed.h, metric.h, model.h's
 * calls, outputs, losses and parameter groups) for every SWIG language:
 * tensor arithmetic with autograd, the grad mode, seeding and determinism,
 * module methods with several inputs and outputs, every loss, Lightning's
 * logged metric and torch.optim's parameter groups. Each method is one C
 * API call (ddp.i's rules); the names are Python's and become lowerCamelCase
 * in Java.
 */

%rename(BinaryOp) ddp_binary_op;
%rename(UnaryOp) ddp_unary_op;
%rename(LossKind) ddp_loss_kind;
%rename(LossReduction) ddp_loss_reduction;
%rename(MetricReduce) ddp_metric_reduce;
typedef enum ddp_binary_op {
  DDP_OP_ADD = 0, DDP_OP_SUB = 1, DDP_OP_MUL = 2, DDP_OP_DIV = 3, DDP_OP_POW = 4, DDP_OP_MAXIMUM = 5,
  DDP_OP_MINIMUM = 6
} ddp_binary_op;
typedef enum ddp_unary_op {
  DDP_OP_NEG = 0, DDP_OP_EXP = 1, DDP_OP_LOG = 2, DDP_OP_SQRT = 3, DDP_OP_ABS = 4, DDP_OP_SQUARE = 5,
  DDP_OP_RELU = 6, DDP_OP_SIGMOID = 7, DDP_OP_TANH = 8, DDP_OP_LOG1P = 9, DDP_OP_SIN = 10, DDP_OP_COS = 11
} ddp_unary_op;
typedef enum ddp_loss_kind {
  DDP_LOSS_MSE = 0, DDP_LOSS_CROSS_ENTROPY = 1, DDP_LOSS_BCE_WITH_LOGITS = 2, DDP_LOSS_L1 = 3,
  DDP_LOSS_SMOOTH_L1 = 4, DDP_LOSS_HUBER = 5, DDP_LOSS_NLL = 6, DDP_LOSS_KL_DIV = 7
} ddp_loss_kind;
typedef enum ddp_loss_reduction {
  DDP_REDUCTION_MEAN = 0, DDP_REDUCTION_SUM = 1, DDP_REDUCTION_NONE = 2, DDP_REDUCTION_BATCHMEAN = 3
} ddp_loss_reduction;
typedef enum ddp_metric_reduce { DDP_METRIC_MEAN = 0, DDP_METRIC_SUM = 1, DDP_METRIC_MAX = 2, DDP_METRIC_MIN = 3 } ddp_metric_reduce;

%rename(Outputs) DdpOutputs;
typedef struct {} DdpOutputs;
%rename(Metric) DdpMetric;
typedef struct {} DdpMetric;
%rename(ParamGroups) DdpParamGroups;
typedef struct {} DdpParamGroups;

%newobject DdpTensor::clone;
%newobject DdpTensor::sum;
%newobject DdpTensor::mean;
%newobject DdpTensor::softmax;
%newobject DdpTensor::unary;
%newobject DdpTensor::binary;
%newobject DdpTensor::binary_scalar;
%newobject DdpTensor::grad;
%newobject DdpOutputs::at;
%newobject DdpOutputs::get;
%newobject DdpModule::call;
%newobject DdpModule::load_state_dict_nonstrict;
%newobject DdpOptimizer::sgd_groups;
%newobject DdpOptimizer::adam_groups;
%newobject DdpOptimizer::adamw_groups;
%newobject DdpOptimizer::from_torch_address;
%newobject DdpLrScheduler::sequential;
%newobject loss;

%extend DdpTensor {
  /** clone().detach(): a copy in new memory, outside the autograd graph. */
  DdpTensor *clone() {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_clone($self, &out));
    return out;
  }
  /** A one-element tensor's value (torch's item()). */
  double item() {
    double v = 0;
    ddp_swig_check(ddp_tensor_item($self, &v));
    return v;
  }
  /** Over dims (empty: every dimension, a 0-d result; Python: dims=() by default). */
  DdpTensor *sum(const int64_t *dims, size_t ndims, bool keepdim = false) {
    return ddp_swig_reduce(0, $self, dims, ndims, keepdim);
  }
  /** The mean over dims (empty: every dimension, a 0-d result). */
  DdpTensor *mean(const int64_t *dims, size_t ndims, bool keepdim = false) {
    return ddp_swig_reduce(1, $self, dims, ndims, keepdim);
  }
  /** softmax, or log_softmax with log, along dim (negative: from the end). */
  DdpTensor *softmax(long long dim, bool log = false) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_softmax($self, dim, log, &out));
    return out;
  }
  /** op applied to every element (neg, exp, log, sqrt, relu, sigmoid, tanh, ...). */
  DdpTensor *unary(ddp_unary_op op) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_unary(op, $self, &out));
    return out;
  }
  /** self (op) other, element-wise with broadcasting. */
  DdpTensor *binary(ddp_binary_op op, const DdpTensor *other) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_binary(op, $self, other, &out));
    return out;
  }
  /** self (op) scalar, element-wise. */
  DdpTensor *binary_scalar(ddp_binary_op op, double scalar) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_binary_scalar(op, $self, scalar, &out));
    return out;
  }
  /** Autograd's backward from this one-element tensor, on this process only
   * (Strategy.backward is the one that averages over the ranks). */
  void backward() { ddp_swig_check(ddp_tensor_backward($self)); }
  /** The gradient autograd accumulated into this leaf; None/null when none. */
  DdpTensor *grad() {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_tensor_grad($self, &out));
    return out;
  }
  /** Whether autograd records operations on this tensor. */
  bool requires_grad() { return ddp_tensor_requires_grad($self) != 0; }
  /** Makes this tensor a leaf that autograd records (or stops recording). */
  void set_requires_grad(bool on) { ddp_swig_check(ddp_tensor_set_requires_grad($self, on)); }
  /** Writes this tensor into the caller's at::Tensor at address (JavaCPP's
   * presets: tensor.address()), sharing memory; see from_aten_address. */
  void to_aten_address(long long address) { ddp_swig_check(ddp_tensor_to_aten($self, (void *)(intptr_t)address)); }
}

/* What a module's method returned: a tensor, a tuple or list, or a dict. */
%extend DdpOutputs {
  ~DdpOutputs() { ddp_outputs_free($self); }
  /** The number of outputs. */
  size_t count() { return ddp_outputs_count($self); }
  /** Element index (a dict's in its order); it keeps its autograd graph. */
  DdpTensor *at(size_t index) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_outputs_at($self, index, &out));
    return out;
  }
  /** A dict's entry. */
  DdpTensor *get(const char *key) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_outputs_get($self, key, &out));
    return out;
  }
  /** A dict's key index; None/null when not a dict or out of range. */
  const char *key(size_t index) { return ddp_outputs_key($self, index); }
}

%extend DdpModule {
  /** The module's method (None/null: forward) on the inputs, with keyword
   * inputs by name (kw_names[i] gets kw_values[i]); without the strategy. */
  DdpOutputs *call(const char *method, DdpTensor **TENSORS, size_t NTENSORS, char **kw_names = NULL,
                   DdpTensor **kw_values = NULL, size_t num_kw = 0) {
    DdpOutputs *out = NULL;
    size_t n = 0;
    while (kw_names && kw_names[n]) ++n;
    if (n != num_kw) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "Module.call: one keyword name per keyword value");
      return NULL;
    }
    ddp_swig_check(ddp_module_call_v2($self, method, (const ddp_tensor *const *)TENSORS, NTENSORS,
                                      (const char *const *)kw_names, (const ddp_tensor *const *)kw_values, num_kw,
                                      &out));
    return out;
  }
  /** load_state_dict(strict=False): returns what it skipped ("missing: ...",
   * "unexpected: ..." lines; empty when nothing was). */
  char *load_state_dict_nonstrict(const char *path) {
    ddp_buffer *skipped = NULL;
    char *text = NULL;
    if (ddp_swig_check(ddp_module_load_state_dict_nonstrict($self, path, &skipped))) return NULL;
    size_t n = skipped ? ddp_buffer_size(skipped) : 0;
    text = (char *)malloc(n + 1);
    if (text) {
      if (n) memcpy(text, ddp_buffer_data(skipped), n);
      text[n] = 0;
    }
    ddp_buffer_free(skipped);
    return text;
  }
}

/* torch.optim's param_groups, chosen by parameter name patterns (fnmatch
 * over the dotted names; see ddp_param_group): add one group at a time, in
 * order; a group without patterns takes the rest. */
%extend DdpParamGroups {
  DdpParamGroups() { return (DdpParamGroups *)calloc(1, sizeof(DdpParamGroups)); }
  ~DdpParamGroups() {
    for (size_t i = 0; i < $self->count; ++i) ddp_swig_free_strings($self->patterns[i]);
    free($self->patterns);
    free($self->groups);
    free($self);
  }
  /** A hyper-parameter left at INHERIT (-1) is the optimizer's. */
  void add(char **patterns, double lr = DDP_INHERIT, double weight_decay = DDP_INHERIT,
           double momentum = DDP_INHERIT) {
    size_t n = 0, count = $self->count;
    ddp_param_group g = DDP_PARAM_GROUP_INIT;
    char **copy = ddp_swig_copy_strings(patterns, &n);
    ddp_param_group *groups = (ddp_param_group *)realloc($self->groups, (count + 1) * sizeof *groups);
    if (groups) $self->groups = groups;
    char ***lists = (char ***)realloc($self->patterns, (count + 1) * sizeof *lists);
    if (lists) $self->patterns = lists;
    if (!groups || !lists || (n && !copy)) {
      ddp_swig_free_strings(copy);
      ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding");
      return;
    }
    g.patterns = (const char *const *)copy;
    g.num_patterns = n;
    g.lr = lr;
    g.weight_decay = weight_decay;
    g.momentum = momentum;
    $self->groups[count] = g;
    $self->patterns[count] = copy;
    $self->count = count + 1;
  }
  /** The number of groups added. */
  size_t count() { return $self->count; }
}

%extend DdpOptimizer {
  /** torch.optim.SGD / Adam / AdamW over parameter groups; options give the
   * defaults each group's own values replace. */
  static DdpOptimizer *sgd_groups(DdpModule *module, const ddp_sgd_options *options, const DdpParamGroups *groups) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_sgd_groups(&opt, module, options, groups ? groups->groups : NULL,
                                                  groups ? groups->count : 0));
    return opt;
  }
  /** torch.optim.Adam over parameter groups (see sgd_groups). */
  static DdpOptimizer *adam_groups(DdpModule *module, const ddp_adam_options *options, const DdpParamGroups *groups) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_adam_groups(&opt, module, options, groups ? groups->groups : NULL,
                                                  groups ? groups->count : 0));
    return opt;
  }
  /** torch.optim.AdamW over parameter groups (see sgd_groups). */
  static DdpOptimizer *adamw_groups(DdpModule *module, const ddp_adam_options *options, const DdpParamGroups *groups) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_adamw_groups(&opt, module, options, groups ? groups->groups : NULL,
                                                  groups ? groups->count : 0));
    return opt;
  }
  /** The caller's own torch::optim::Optimizer (JavaCPP: optimizer.address()),
   * shared: steps and checkpoints go through it. */
  static DdpOptimizer *from_torch_address(long long address) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_from_torch(&opt, (void *)(intptr_t)address));
    return opt;
  }
  /** The number of parameter groups. */
  size_t num_groups() { return ddp_optimizer_num_groups($self); }
  /** The learning rate of a parameter group. */
  double group_lr(size_t group) {
    double lr = 0;
    ddp_swig_check(ddp_optimizer_group_lr($self, group, &lr));
    return lr;
  }
  /** Sets the learning rate of one parameter group. */
  void set_group_lr(size_t group, double lr) { ddp_swig_check(ddp_optimizer_set_group_lr($self, group, lr)); }
}

/* Lightning's self.log(..., on_epoch=True, reduce_fx=..., sync_dist=...). */
%extend DdpMetric {
  DdpMetric(ddp_metric_reduce reduce = DDP_METRIC_MEAN) {
    DdpMetric *m = NULL;
    ddp_swig_check(ddp_metric_new(&m, reduce));
    return m;
  }
  ~DdpMetric() { ddp_metric_free($self); }
  /** One batch: its value and its size (the mean's weight). */
  void update(double value, long long batch_size = 1) { ddp_swig_check(ddp_metric_update($self, value, batch_size)); }
  /** The epoch's value: this rank's (strategy None/null), or over every rank
   * of a set-up strategy (sync_dist; collective). */
  double compute(DdpStrategy *strategy = NULL) {
    double v = 0;
    ddp_swig_check(ddp_metric_compute($self, strategy, &v));
    return v;
  }
  /** Clears the accumulated values, for the next epoch. */
  void reset() { ddp_swig_check(ddp_metric_reset($self)); }
}

/* A loss and its torch.nn.functional arguments, PyTorch's defaults; the
 * weight tensors are borrowed: keep them while the options are used. */
%rename(LossOptions) ddp_loss_options;
typedef struct ddp_loss_options {
  ddp_loss_kind kind;
  ddp_loss_reduction reduction;
  const DdpTensor *weight;
  long long ignore_index;
  double label_smoothing;
  const DdpTensor *pos_weight;
  double beta;
  double delta;
  int log_target;
} ddp_loss_options;
%extend ddp_loss_options {
  ddp_loss_options(ddp_loss_kind kind = DDP_LOSS_MSE) {
    ddp_loss_options *o = (ddp_loss_options *)malloc(sizeof *o);
    if (o) {
      ddp_loss_options init = DDP_LOSS_OPTIONS_INIT(kind);
      *o = init;
    }
    return o;
  }
  ~ddp_loss_options() { free($self); }
}

%{
/* The loss options names, computed by ATen's kernel (value and gradient). */
DdpTensor *loss(const ddp_loss_options *options, const DdpTensor *input, const DdpTensor *target) {
  DdpTensor *out = NULL;
  ddp_swig_check(ddp_loss_compute(options, input, target, &out));
  return out;
}
/* torch.set_grad_enabled for this thread; returns the previous mode. */
bool set_grad_enabled(bool enabled) {
  int previous = 1;
  ddp_swig_check(ddp_grad_set_enabled(enabled, &previous));
  return previous != 0;
}
bool is_grad_enabled(void) { return ddp_grad_is_enabled() != 0; }
/* Lightning's seed_everything(seed, workers); returns the seed used. */
long long seed_everything(long long seed, bool workers) {
  int64_t used = 0;
  ddp_swig_check(ddp_seed_everything(seed, workers, &used));
  return (long long)used;
}
/* Lightning's reset_seed(): true when PL_GLOBAL_SEED was set and used. */
bool reset_seed(void) {
  int seeded = 0;
  ddp_swig_check(ddp_reset_seed(&seeded));
  return seeded != 0;
}
/* The Trainer's deterministic flag (torch.use_deterministic_algorithms). */
void set_deterministic(bool on, bool warn_only) { ddp_swig_check(ddp_set_deterministic(on, warn_only)); }
bool is_deterministic(void) { return ddp_is_deterministic() != 0; }
const char *dtype_name(ddp_dtype dtype) { return ddp_dtype_name(dtype); }
unsigned int version_number(void) { return ddp_version_number(); }
%}
DdpTensor *loss(const ddp_loss_options *options, const DdpTensor *input, const DdpTensor *target);
bool set_grad_enabled(bool enabled);
bool is_grad_enabled(void);
long long seed_everything(long long seed, bool workers = false);
bool reset_seed(void);
void set_deterministic(bool on, bool warn_only = false);
bool is_deterministic(void);
const char *dtype_name(ddp_dtype dtype);
unsigned int version_number(void);
