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

typedef struct ddp_module ddp_module;
typedef struct ddp_optimizer ddp_optimizer;

/**
 * Loads a TorchScript module saved by torch.jit.save.
 * @param[out] out new reference; NULL on error.
 * @return DDP_OK; DDP_E_IO naming @p path when it is not a loadable TorchScript file.
 */
DDP_API ddp_status ddp_module_load(ddp_module **out, const char *path);

/**
 * The module's forward on one tensor, without the strategy (evaluation, or a
 * module that is not trained here). ddp_strategy_forward is the training path.
 * @param[out] out new reference to the output (keeps its autograd graph).
 */
DDP_API ddp_status ddp_module_forward(ddp_module *m, const ddp_tensor *input, ddp_tensor **out);

/** Training mode on (1) or off (0): dropout, batch norm and the like. */
DDP_API ddp_status ddp_module_train(ddp_module *m, int on);

/** @return the number of parameter tensors; 0 for an invalid handle. */
DDP_API size_t ddp_module_num_parameters(const ddp_module *m);

/** Frees @p m; NULL is accepted. Free its optimizer and the strategy using it first, or after: each keeps what it needs. */
DDP_API void ddp_module_free(ddp_module *m);

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

#define DDP_SGD_OPTIONS_INIT {DDP_SGD_OPTIONS_VERSION, 0.001, 0, 0, 0, 0}

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

#define DDP_ADAM_OPTIONS_INIT {DDP_ADAM_OPTIONS_VERSION, 0.001, 0.9, 0.999, 1e-8, 0, 0}
#define DDP_ADAMW_OPTIONS_INIT {DDP_ADAM_OPTIONS_VERSION, 0.001, 0.9, 0.999, 1e-8, 0.01, 0}

/**
 * An optimizer over @p m's parameters. Make it after ddp_strategy_setup_module
 * (which may move the parameters to the root device).
 * @param opts NULL for the defaults.
 * @return DDP_OK; DDP_E_INVALID_ARGUMENT naming a bad hyper-parameter.
 */
DDP_API ddp_status ddp_optimizer_new_sgd(ddp_optimizer **out, ddp_module *m, const ddp_sgd_options *opts);
DDP_API ddp_status ddp_optimizer_new_adam(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts);
DDP_API ddp_status ddp_optimizer_new_adamw(ddp_optimizer **out, ddp_module *m, const ddp_adam_options *opts);

/** Sets the gradients of the optimizer's parameters to none (PyTorch 2's default). */
DDP_API ddp_status ddp_optimizer_zero_grad(ddp_optimizer *opt);

/** Frees @p opt; NULL is accepted. */
DDP_API void ddp_optimizer_free(ddp_optimizer *opt);

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

/**
 * @p loss times @p factor, keeping the autograd graph: Lightning's gradient
 * accumulation divides each micro-batch's loss by accumulate_grad_batches
 * before backward.
 * @param[out] out new reference.
 */
DDP_API ddp_status ddp_loss_scale(const ddp_tensor *loss, double factor, ddp_tensor **out);

DDP_EXTERN_C_END

#endif /* DDP_MODEL_H */
