/**
 * @file model.h
 * @brief Models for the strategy: TorchScript modules (torch::jit::load),
 *        LibTorch's own optimizers (SGD, Adam, AdamW) and losses.
 *
 * A module is written and exported in Python (torch.jit.script or
 * torch.jit.trace, then .save) and trained from any language through the
 * strategy (strategy.h): ddp_strategy_setup_module places and wraps it,
 * ddp_strategy_forward runs it, a loss from here gives ddp_strategy_backward
 * its starting point, and ddp_strategy_optimizer_step steps an optimizer made
 * here. Nothing of the update rules or losses is written in libddp.
 *
 * Threading: a module and its optimizer are used from one thread at a time.
 */
#ifndef DDP_MODEL_H
#define DDP_MODEL_H

#include "ddp/common.h"
#include "ddp/tensor.h"

DDP_EXTERN_C_BEGIN

/** A model: a TorchScript module (ddp_module_load) or one made of the caller's tensors; freed with ddp_module_free. */
typedef struct ddp_module ddp_module;
/** An optimizer over a module's parameters (LibTorch's SGD, Adam, AdamW, or the caller's); freed with ddp_optimizer_free. */
typedef struct ddp_optimizer ddp_optimizer;
/** What a module's method returned: tensors by index, and by key for a dict. */
typedef struct ddp_outputs ddp_outputs;

/**
 * Loads a TorchScript module saved by torch.jit.save.
 * @param[out] out new reference; NULL on error.
 * @return DDP_OK; DDP_E_IO naming @p path when it is not a loadable TorchScript file.
 */
DDP_API ddp_status ddp_module_load(ddp_module **out, const char *path);

/**
 * A model the caller owns and runs itself (a LibTorch `torch::nn::Module`,
 * JavaCPP's or tch-rs's tensors; C++: ddp::module_from in torch.hpp), as a
 * module without methods: its @p n parameters and buffers by dotted name
 * ("net.0.weight", "bn.running_mean"; a Python module with the same
 * attributes has the same names), shared, never copied. The strategy sets it
 * up (rank 0's values are written into the caller's tensors), synchronises
 * its gradients through autograd hooks on the parameters, and checkpoints it
 * by name; ddp_module_get / _set / _state_* and the state dict calls work
 * on it. Its forward is the caller's, between ddp_strategy_forward_begin
 * and _end. Frozen parameters (not requiring grad) are kept out of the
 * gradient synchronisation, as PyTorch's DDP does.
 * @param tensors each made with ddp_tensor_from_aten (or any tensor handle); borrowed.
 * @param is_buffer NULL: all parameters; else 1 for a buffer, 0 for a parameter.
 * @param[out] out new reference.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a NULL name or tensor, a
 *         name given twice or also the prefix of another ("fc" and
 *         "fc.weight"), an empty name part, or a parameter that is not a
 *         leaf tensor.
 */
DDP_API ddp_status ddp_module_from_tensors(ddp_module **out, const char *const *names, ddp_tensor *const *tensors,
                                           const int *is_buffer, size_t n);

/**
 * The module's forward on one tensor, without the strategy (evaluation, or a
 * module that is not trained here). ddp_strategy_forward is the training path.
 * @param[out] out new reference to the output (keeps its autograd graph).
 */
DDP_API ddp_status ddp_module_forward(ddp_module *m, const ddp_tensor *input, ddp_tensor **out);

/**
 * The module's method @p method (NULL: "forward"; any method the module
 * exports with \@torch.jit.export) on @p num_inputs tensors, without the
 * strategy (ddp_strategy_call is the training path). The method may return
 * a tensor, a tuple or list of tensors, or a dict from strings to tensors.
 * @param inputs borrowed for the call; each is moved to the module's device.
 * @param[out] out new reference.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a method the module does not
 *         have, an input count the method does not take (with how many it
 *         takes; its defaults fill the tail), the module's refusal of an
 *         input, or an output of another kind (naming its type).
 */
DDP_API ddp_status ddp_module_call(ddp_module *m, const char *method, const ddp_tensor *const *inputs,
                                   size_t num_inputs, ddp_outputs **out);

/**
 * ddp_module_call with keyword inputs too: @p kw_values[i] is given as the
 * method's argument named @p kw_names[i] (Python's keyword arguments).
 * @return DDP_E_INVALID_ARGUMENT naming an unknown keyword, one given twice
 *         or also given by position, or an argument given by neither.
 */
DDP_API ddp_status ddp_module_call_v2(ddp_module *m, const char *method, const ddp_tensor *const *inputs,
                                      size_t num_inputs, const char *const *kw_names,
                                      const ddp_tensor *const *kw_values, size_t num_kw, ddp_outputs **out);

/** @return the number of tensors @p o holds (1 for a single tensor); 0 for an invalid handle. */
DDP_API size_t ddp_outputs_count(const ddp_outputs *o);

/**
 * Output @p index (a tuple's or list's element; a dict's in its order).
 * @param[out] out new reference (it keeps its autograd graph).
 * @return DDP_E_INVALID_ARGUMENT for an index past the count.
 */
DDP_API ddp_status ddp_outputs_at(const ddp_outputs *o, size_t index, ddp_tensor **out);

/**
 * A dict output's entry @p key. @param[out] out new reference.
 * @return DDP_E_INVALID_ARGUMENT naming a key the dict does not have (and
 *         the keys it has), or when the output is not a dict.
 */
DDP_API ddp_status ddp_outputs_get(const ddp_outputs *o, const char *key, ddp_tensor **out);

/** @return a dict output's key @p index (borrowed, lives as long as @p o); NULL when not a dict or out of range. */
DDP_API const char *ddp_outputs_key(const ddp_outputs *o, size_t index);

/** Frees @p o (the tensors taken from it stay valid); NULL is accepted. */
DDP_API void ddp_outputs_free(ddp_outputs *o);

/** Training mode on (1) or off (0): dropout, batch norm and the like. */
DDP_API ddp_status ddp_module_train(ddp_module *m, int on);

/** @return the number of parameter tensors; 0 for an invalid handle. */
DDP_API size_t ddp_module_num_parameters(const ddp_module *m);

/** Frees @p m; NULL is accepted. Free its optimizer and the strategy using it first, or after: each keeps what it needs. */
DDP_API void ddp_module_free(ddp_module *m);

/**
 * Writes @p m as a TorchScript archive with its current weights (what
 * torch.jit.save writes) to @p path, atomically (a temporary file renamed).
 * torch.jit.load in Python opens it and gives the same outputs. A module set
 * up with sync_batchnorm is written as it was loaded (plain batch norms).
 * Under a strategy, ddp_strategy_save_module writes it from rank 0 only.
 * @return DDP_OK; DDP_E_IO naming the path and the reason, among them a path
 *         that names a directory, a device (/dev/null) or a FIFO, which the
 *         rename would replace (every save of libddp's refuses those).
 */
DDP_API ddp_status ddp_module_save(const ddp_module *m, const char *path);

/**
 * The number of entries of the module's state: its parameters, then its
 * buffers (running statistics and the like), in registration order, as
 * PyTorch's state_dict() lists them; 0 for an invalid handle.
 */
DDP_API size_t ddp_module_state_count(const ddp_module *m);

/**
 * The dotted name of state entry @p index ("fc1.weight", "bn1.running_mean").
 * @param[out] name borrowed: lives as long as @p m.
 * @param[out] is_parameter may be NULL: 1 for a parameter, 0 for a buffer.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for an index past the count.
 */
DDP_API ddp_status ddp_module_state_name(const ddp_module *m, size_t index, const char **name, int *is_parameter);

/**
 * The parameter or buffer @p name, without a copy: a new reference to a
 * tensor that shares the module's memory (detached from autograd); its
 * shape and dtype come from ddp_tensor_shape and ddp_tensor_dtype. Writing
 * into it writes the module's weight; copy it (ddp_tensor_clone) to keep a
 * value across training steps.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming an unknown name.
 */
DDP_API ddp_status ddp_module_get(const ddp_module *m, const char *name, ddp_tensor **out);

/**
 * The gradient of parameter @p name after a backward, sharing its memory.
 * @param[out] out new reference, or NULL when the parameter has none (no
 *         backward yet, after zero_grad, or a frozen parameter).
 * @return DDP_E_INVALID_ARGUMENT naming an unknown parameter.
 */
DDP_API ddp_status ddp_module_grad(const ddp_module *m, const char *name, ddp_tensor **out);

/**
 * Copies @p value into the parameter or buffer @p name (onto its device).
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming the entry and both shapes or
 *         dtypes when they differ, or an unknown name; nothing changes then.
 */
DDP_API ddp_status ddp_module_set(ddp_module *m, const char *name, const ddp_tensor *value);

/**
 * Writes the module's state dict (name -> tensor, parameters then buffers)
 * as a torch.save file: `model.load_state_dict(torch.load(path,
 * weights_only=True))` in Python takes it. Written atomically.
 */
DDP_API ddp_status ddp_module_save_state_dict(const ddp_module *m, const char *path);

/**
 * Reads a state dict saved by torch.save(model.state_dict(), path) (or by
 * ddp_module_save_state_dict) into @p m. Every entry of the module must be
 * in the file with its shape and dtype; with @p strict, the file may hold
 * nothing else (PyTorch's strict=True). Only tensors, containers, numbers
 * and strings are read; nothing in the file is run.
 * @return DDP_OK; DDP_E_IO naming the first missing, unexpected or
 *         mis-shaped entry, or what is wrong with the file; the module is
 *         then unchanged.
 */
DDP_API ddp_status ddp_module_load_state_dict(ddp_module *m, const char *path, int strict);

/**
 * PyTorch's load_state_dict(strict=False), naming what it skipped: the
 * entries of the file that fit the module (name, shape and dtype) are
 * copied; the module's entries the file lacks keep their values, and the
 * file's entries the module does not have are ignored. An entry of both
 * with another shape or dtype is still DDP_E_IO naming it, and nothing
 * changes then (as PyTorch's size mismatch).
 * @param[out] skipped may be NULL; new reference to text with one line per
 *         skipped entry: "missing <name>" (the module's, not in the file)
 *         or "unexpected <name>" (the file's, not in the module); empty
 *         when nothing was skipped.
 */
DDP_API ddp_status ddp_module_load_state_dict_nonstrict(ddp_module *m, const char *path, ddp_buffer **skipped);

/** The version of ::ddp_sgd_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_SGD_OPTIONS_VERSION 1

/** torch.optim.SGD's arguments. Initialise with DDP_SGD_OPTIONS_INIT. */
typedef struct ddp_sgd_options {
  unsigned int version; /**< DDP_SGD_OPTIONS_VERSION */
  double lr;            /**< 0.001 */
  double momentum;      /**< 0 */
  double dampening;     /**< 0 */
  double weight_decay;  /**< 0 */
  int nesterov;         /**< 0 */
} ddp_sgd_options;

/** An initialiser of ::ddp_sgd_options with the defaults: `ddp_sgd_options o = DDP_SGD_OPTIONS_INIT;` */
#define DDP_SGD_OPTIONS_INIT {DDP_SGD_OPTIONS_VERSION, 0.001, 0, 0, 0, 0}

/** The version of ::ddp_adam_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_ADAM_OPTIONS_VERSION 1

/** torch.optim.Adam's and AdamW's arguments. Initialise with DDP_ADAM_OPTIONS_INIT or DDP_ADAMW_OPTIONS_INIT. */
typedef struct ddp_adam_options {
  unsigned int version; /**< DDP_ADAM_OPTIONS_VERSION */
  double lr;            /**< 0.001 */
  double beta1;         /**< 0.9 */
  double beta2;         /**< 0.999 */
  double eps;           /**< 1e-8 */
  double weight_decay;  /**< Adam 0, AdamW 0.01 (decoupled) */
  int amsgrad;          /**< 0 */
} ddp_adam_options;

/** An initialiser of ::ddp_adam_options with the defaults: `ddp_adam_options o = DDP_ADAM_OPTIONS_INIT;` */
#define DDP_ADAM_OPTIONS_INIT {DDP_ADAM_OPTIONS_VERSION, 0.001, 0.9, 0.999, 1e-8, 0, 0}
/** An initialiser of ::ddp_adam_options with AdamW's defaults (weight decay 0.01). */
#define DDP_ADAMW_OPTIONS_INIT {DDP_ADAM_OPTIONS_VERSION, 0.001, 0.9, 0.999, 1e-8, 0.01, 0}

/**
 * An optimizer over @p m's parameters. Make it after ddp_strategy_setup_module
 * (which may move the parameters to the root device).
 * @param opts NULL for the defaults.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a bad hyper-parameter.
 */
DDP_API ddp_status ddp_optimizer_new_sgd(ddp_optimizer **out, ddp_module *m, const ddp_sgd_options *opts);
/** torch.optim.Adam over the module's parameters (ddp_optimizer_new_sgd's contract). */
DDP_API ddp_status ddp_optimizer_new_adam(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts);
/** torch.optim.AdamW (decoupled weight decay) over the module's parameters (ddp_optimizer_new_sgd's contract). */
DDP_API ddp_status ddp_optimizer_new_adamw(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts);

/**
 * For programs that use LibTorch themselves: a handle to the caller's own
 * torch::optim::SGD, Adam or AdamW (found from its type), which libddp then
 * treats as one of its own: ddp_strategy_optimizer_step (unscale, clip,
 * skip), LR schedulers, and its state and param_groups in and out of
 * checkpoints in torch.optim's layout, so that PyTorch and Lightning resume
 * them. The optimizer's parameters are the ones it was given (in C++,
 * module->parameters(): the order PyTorch's optimizer numbers them in), in
 * the groups it has when the handle is made: after add_param_group, make
 * a new handle.
 * Not stable ABI: libddp and the caller must use the same LibTorch (see
 * ddp_torch_check_version).
 *
 * @param[out] out new reference (ddp_optimizer_free frees the handle, never
 *        the optimizer); NULL on error.
 * @param torch_optimizer address of a torch::optim::Optimizer (the base
 *        class: `static_cast<torch::optim::Optimizer*>(&sgd)`); borrowed: it
 *        must outlive the handle.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL or another kind of
 *         optimizer (named).
 */
DDP_API ddp_status ddp_optimizer_from_torch(ddp_optimizer **out, void *torch_optimizer);

/** The version of ::ddp_param_group this header declares (its first field; the _INIT macro sets it). */
#define DDP_PARAM_GROUP_VERSION 1

/** A hyper-parameter of a ddp_param_group that the optimizer's options give. */
#define DDP_INHERIT (-1.0)

/**
 * One of torch.optim's parameter groups, chosen by parameter name, with its
 * own hyper-parameters (e.g. no weight decay on biases and norms):
 * @code
 *   const char *no_decay[] = {"*.bias", "norm*"};
 *   ddp_param_group g[2] = {DDP_PARAM_GROUP_INIT, DDP_PARAM_GROUP_INIT};
 *   g[1].patterns = no_decay; g[1].num_patterns = 2; g[1].weight_decay = 0;
 *   ddp_optimizer_new_adamw_groups(&opt, m, &adamw, g, 2);  // g[0]: the rest
 * @endcode
 * Patterns are shell-style (fnmatch: '*' also crosses dots) over the
 * dotted names of ddp_module_state_name. A parameter goes to the first
 * group with a pattern that matches it; the group without patterns takes
 * the rest, at its place in the list. Within a group the parameters keep
 * the module's order, so the state_dict is the one PyTorch writes for the
 * same groups. Initialise with DDP_PARAM_GROUP_INIT.
 */
typedef struct ddp_param_group {
  unsigned int version;           /**< DDP_PARAM_GROUP_VERSION */
  const char *const *patterns;    /**< borrowed for the call; NULL with 0: the rest */
  size_t num_patterns; /**< the patterns' count */
  double lr;                      /**< DDP_INHERIT: the optimizer's */
  double weight_decay;            /**< DDP_INHERIT: the optimizer's */
  double momentum;                /**< SGD only; DDP_INHERIT: the optimizer's */
} ddp_param_group;

/** An initialiser of ::ddp_param_group with the defaults: `ddp_param_group o = DDP_PARAM_GROUP_INIT;` */
#define DDP_PARAM_GROUP_INIT {DDP_PARAM_GROUP_VERSION, NULL, 0, DDP_INHERIT, DDP_INHERIT, DDP_INHERIT}

/**
 * An optimizer over @p m's parameters in @p num_groups groups (torch.optim's
 * param_groups); @p opts are the defaults each group's own values replace.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a pattern that matches no
 *         parameter, a group left with none (earlier groups took them all), a
 *         second group without patterns, a parameter in no group (when no
 *         group takes the rest), or a bad hyper-parameter with its group.
 */
DDP_API ddp_status ddp_optimizer_new_sgd_groups(ddp_optimizer **out, ddp_module *m, const ddp_sgd_options *opts,
                                                const ddp_param_group *groups, size_t num_groups);
/** Adam with parameter groups (ddp_optimizer_new_sgd_groups' contract). */
DDP_API ddp_status ddp_optimizer_new_adam_groups(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts,
                                                 const ddp_param_group *groups, size_t num_groups);
/** AdamW with parameter groups (ddp_optimizer_new_sgd_groups' contract). */
DDP_API ddp_status ddp_optimizer_new_adamw_groups(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts,
                                                  const ddp_param_group *groups, size_t num_groups);

/** @return the number of parameter groups (1 unless made with groups); 0 for an invalid handle. */
DDP_API size_t ddp_optimizer_num_groups(const ddp_optimizer *opt);

/** Group @p group's learning rate. @return DDP_E_INVALID_ARGUMENT for a group past the count. */
DDP_API ddp_status ddp_optimizer_group_lr(const ddp_optimizer *opt, size_t group, double *out);

/** Sets group @p group's learning rate. @return DDP_E_INVALID_ARGUMENT for a group past the count or a negative rate. */
DDP_API ddp_status ddp_optimizer_set_group_lr(ddp_optimizer *opt, size_t group, double lr);

/** The learning rate in effect (what a scheduler sets); with groups, the first group's. */
DDP_API ddp_status ddp_optimizer_lr(const ddp_optimizer *opt, double *out);

/** Sets the learning rate (a schedule written by the caller), of every group. @return DDP_E_INVALID_ARGUMENT for a negative rate. */
DDP_API ddp_status ddp_optimizer_set_lr(ddp_optimizer *opt, double lr);

/** Sets the gradients of the optimizer's parameters to none (PyTorch 2's default). */
DDP_API ddp_status ddp_optimizer_zero_grad(ddp_optimizer *opt);

/** Frees @p opt; NULL is accepted. */
DDP_API void ddp_optimizer_free(ddp_optimizer *opt);

/** A learning-rate scheduler over an optimizer (torch.optim.lr_scheduler); freed with ddp_lr_scheduler_free. */
typedef struct ddp_lr_scheduler ddp_lr_scheduler;

/** torch.optim.lr_scheduler's schedulers (SequentialLR: ddp_lr_scheduler_new_sequential). */
typedef enum ddp_lr_scheduler_kind {
  DDP_LR_STEP = 0,           /**< StepLR(step_size, gamma) */
  DDP_LR_MULTI_STEP = 1,     /**< MultiStepLR(milestones, gamma) */
  DDP_LR_EXPONENTIAL = 2,    /**< ExponentialLR(gamma) */
  DDP_LR_COSINE_ANNEALING = 3, /**< CosineAnnealingLR(T_max, eta_min) */
  DDP_LR_LINEAR = 4,         /**< LinearLR(start_factor, end_factor, total_iters): the usual warmup */
  DDP_LR_ONE_CYCLE = 5,      /**< OneCycleLR(max_lr, total_steps, pct_start, ...) */
  DDP_LR_REDUCE_ON_PLATEAU = 6 /**< ReduceLROnPlateau(mode, factor, patience, ...), stepped with a metric */
} ddp_lr_scheduler_kind;

/** The version of ::ddp_lr_scheduler_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_LR_SCHEDULER_OPTIONS_VERSION 1

/**
 * A scheduler's arguments, with PyTorch's defaults; each kind reads its own.
 * Initialise with DDP_LR_SCHEDULER_OPTIONS_INIT(kind).
 */
typedef struct ddp_lr_scheduler_options {
  unsigned int version;        /**< DDP_LR_SCHEDULER_OPTIONS_VERSION */
  ddp_lr_scheduler_kind kind; /**< which scheduler */
  int64_t step_size;           /**< StepLR: 1 */
  const int64_t *milestones;   /**< MultiStepLR: borrowed for the call */
  size_t num_milestones; /**< MultiStepLR: the milestones' count */
  double gamma;                /**< StepLR, MultiStepLR, ExponentialLR: 0.1 */
  int64_t t_max;               /**< CosineAnnealingLR: 1 */
  double eta_min;              /**< CosineAnnealingLR: 0 */
  double start_factor;         /**< LinearLR: 1/3 */
  double end_factor;           /**< LinearLR: 1 */
  int64_t total_iters;         /**< LinearLR: 5 */
  double max_lr;               /**< OneCycleLR: required */
  int64_t total_steps;         /**< OneCycleLR: required (epochs x steps_per_epoch) */
  double pct_start;            /**< OneCycleLR: 0.3 */
  int anneal_linear;           /**< OneCycleLR: 0 ("cos"); 1 "linear" */
  int cycle_momentum;          /**< OneCycleLR: 1 (SGD's momentum or Adam's beta1) */
  double base_momentum;        /**< OneCycleLR: 0.85 */
  double max_momentum;         /**< OneCycleLR: 0.95 */
  double div_factor;           /**< OneCycleLR: 25 */
  double final_div_factor;     /**< OneCycleLR: 1e4 */
  int three_phase;             /**< OneCycleLR: 0 */
  int mode_max;                /**< ReduceLROnPlateau: 0 ("min"); 1 "max" */
  double factor;               /**< ReduceLROnPlateau: 0.1 */
  int64_t patience;            /**< ReduceLROnPlateau: 10 */
  double threshold;            /**< ReduceLROnPlateau: 1e-4 */
  int threshold_abs;           /**< ReduceLROnPlateau: 0 ("rel"); 1 "abs" */
  int64_t cooldown;            /**< ReduceLROnPlateau: 0 */
  double min_lr;               /**< ReduceLROnPlateau: 0 */
  double eps;                  /**< ReduceLROnPlateau: 1e-8 */
} ddp_lr_scheduler_options;

/** An initialiser of ::ddp_lr_scheduler_options with the defaults: `ddp_lr_scheduler_options o = DDP_LR_SCHEDULER_OPTIONS_INIT;` */
#define DDP_LR_SCHEDULER_OPTIONS_INIT(kind)                                                                        \
  {DDP_LR_SCHEDULER_OPTIONS_VERSION, (kind), 1, NULL, 0, 0.1, 1, 0.0, 1.0 / 3, 1.0, 5, 0.0, 0, 0.3, 0, 1, 0.85, 0.95, \
   25.0, 1e4, 0, 0, 0.1, 10, 1e-4, 0, 0, 0.0, 1e-8}

/**
 * Fills @p opts with the defaults of DDP_LR_SCHEDULER_OPTIONS_INIT(@p kind),
 * for languages that cannot use the macro.
 * @param version DDP_LR_SCHEDULER_OPTIONS_VERSION.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL @p opts, an unknown
 *         version or an unknown @p kind.
 */
DDP_API ddp_status ddp_lr_scheduler_options_init(ddp_lr_scheduler_options *opts, unsigned int version,
                                                 ddp_lr_scheduler_kind kind);

/**
 * A scheduler over @p opt, which then has the schedule's first learning
 * rate (as PyTorch's constructor leaves it); with parameter groups, each
 * group's rate follows the schedule from its own (PyTorch's base_lrs). It keeps @p opt alive. Step it
 * after the optimizer's step, once per epoch or once per step (Lightning's
 * interval), as the training loop decides. The rates are PyTorch's, step for
 * step (its own chainable formulas).
 * @param[out] out new reference.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a bad argument (PyTorch's checks).
 */
DDP_API ddp_status ddp_lr_scheduler_new(ddp_lr_scheduler **out, ddp_optimizer *opt, const ddp_lr_scheduler_options *o);

/**
 * SequentialLR: @p scheds (made over @p opt, just before) one after another,
 * the next one taking over at each of the @p num_scheds - 1 @p milestones
 * (e.g. LinearLR warmup, then CosineAnnealingLR). Keeps the schedulers alive.
 */
DDP_API ddp_status ddp_lr_scheduler_new_sequential(ddp_lr_scheduler **out, ddp_optimizer *opt,
                                                   ddp_lr_scheduler *const *scheds, size_t num_scheds,
                                                   const int64_t *milestones);

/** scheduler.step(). @return DDP_E_INVALID_ARGUMENT for ReduceLROnPlateau (it needs a metric). */
DDP_API ddp_status ddp_lr_scheduler_step(ddp_lr_scheduler *s);

/** ReduceLROnPlateau's step(metric). @return DDP_E_INVALID_ARGUMENT for the other kinds. */
DDP_API ddp_status ddp_lr_scheduler_step_metric(ddp_lr_scheduler *s, double metric);

/** get_last_lr()[0]: the rate the last step set. */
DDP_API ddp_status ddp_lr_scheduler_last_lr(const ddp_lr_scheduler *s, double *out);

/** Frees @p s; NULL is accepted. */
DDP_API void ddp_lr_scheduler_free(ddp_lr_scheduler *s);

/**
 * Mean squared error, mean over the elements (torch.nn.functional.mse_loss).
 * @param[out] out new reference to a 0-d tensor that keeps the autograd graph.
 */
DDP_API ddp_status ddp_loss_mse(const ddp_tensor *input, const ddp_tensor *target, ddp_tensor **out);

/**
 * Cross entropy of logits @p input (batch x classes) against class indices
 * @p target (batch, DDP_INT64), mean over the batch
 * (torch.nn.functional.cross_entropy).
 */
DDP_API ddp_status ddp_loss_cross_entropy(const ddp_tensor *input, const ddp_tensor *target, ddp_tensor **out);

/** The losses of torch.nn.functional that ddp_loss_compute computes. */
typedef enum ddp_loss_kind {
  DDP_LOSS_MSE = 0,             /**< mse_loss */
  DDP_LOSS_CROSS_ENTROPY = 1,   /**< cross_entropy: class indices (int64) or class probabilities (float, input's shape) */
  DDP_LOSS_BCE_WITH_LOGITS = 2, /**< binary_cross_entropy_with_logits */
  DDP_LOSS_L1 = 3,              /**< l1_loss */
  DDP_LOSS_SMOOTH_L1 = 4,       /**< smooth_l1_loss */
  DDP_LOSS_HUBER = 5,           /**< huber_loss */
  DDP_LOSS_NLL = 6,             /**< nll_loss (input: log-probabilities) */
  DDP_LOSS_KL_DIV = 7,          /**< kl_div (input: log-probabilities) */
  DDP_LOSS_KIND_FORCE_INT = 0x7fffffff
} ddp_loss_kind;

/** torch's reduction= argument. */
typedef enum ddp_loss_reduction {
  DDP_REDUCTION_MEAN = 0,
  DDP_REDUCTION_SUM = 1,
  DDP_REDUCTION_NONE = 2,      /**< one loss per element (or per row for cross entropy and NLL) */
  DDP_REDUCTION_BATCHMEAN = 3, /**< kl_div only: the sum divided by the batch size */
  DDP_LOSS_REDUCTION_FORCE_INT = 0x7fffffff
} ddp_loss_reduction;

/** The version of ::ddp_loss_options this header declares (its first field; the _INIT macro sets it). */
#define DDP_LOSS_OPTIONS_VERSION 1

/** A loss and its torch.nn.functional arguments, with PyTorch's defaults; each kind reads its own. Initialise with DDP_LOSS_OPTIONS_INIT(kind). */
typedef struct ddp_loss_options {
  unsigned int version;           /**< DDP_LOSS_OPTIONS_VERSION */
  ddp_loss_kind kind; /**< which loss */
  ddp_loss_reduction reduction;   /**< DDP_REDUCTION_MEAN */
  const ddp_tensor *weight;       /**< NULL. Cross entropy, NLL: one per class; BCE with logits: broadcast over the input */
  int64_t ignore_index;           /**< -100. Cross entropy, NLL: rows with this class index count for nothing */
  double label_smoothing;         /**< 0. Cross entropy, in [0, 1] */
  const ddp_tensor *pos_weight;   /**< NULL. BCE with logits: one per class (the input's last dimension) */
  double beta;                    /**< 1. Smooth L1, >= 0 */
  double delta;                   /**< 1. Huber, > 0 */
  int log_target;                 /**< 0. KL divergence: the target is log-probabilities */
} ddp_loss_options;

/** An initialiser of ::ddp_loss_options with the defaults: `ddp_loss_options o = DDP_LOSS_OPTIONS_INIT;` */
#define DDP_LOSS_OPTIONS_INIT(kind) {DDP_LOSS_OPTIONS_VERSION, (kind), DDP_REDUCTION_MEAN, NULL, -100, 0.0, NULL, 1.0, 1.0, 0}

/**
 * Fills @p opts with the defaults of DDP_LOSS_OPTIONS_INIT(@p kind), for
 * languages that cannot use the macro.
 * @param version DDP_LOSS_OPTIONS_VERSION.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT for NULL @p opts, an unknown
 *         version or an unknown @p kind.
 */
DDP_API ddp_status ddp_loss_options_init(ddp_loss_options *opts, unsigned int version, ddp_loss_kind kind);

/**
 * The loss @p opts names of @p input against @p target (moved to the
 * input's device), computed by ATen's own kernel: value and gradient are
 * PyTorch's for the same arguments.
 * @param[out] out new reference to a tensor that keeps the autograd graph
 *         (0-d unless the reduction is none).
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming the loss and what is wrong:
 *         shapes that do not fit, a target dtype, a weight of the wrong
 *         size, an argument out of range, 'batchmean' on another loss.
 */
DDP_API ddp_status ddp_loss_compute(const ddp_loss_options *opts, const ddp_tensor *input, const ddp_tensor *target,
                                    ddp_tensor **out);

/**
 * @p loss times @p factor, keeping the autograd graph: Lightning's gradient
 * accumulation divides each micro-batch's loss by accumulate_grad_batches
 * before backward.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_loss_scale(const ddp_tensor *loss, double factor, ddp_tensor **out);

DDP_EXTERN_C_END

#endif /* DDP_MODEL_H */
