/*
 * The rest of the group, work, environment, scheduler and strategy calls for
 * every SWIG language (collectives.h, group.h, env.h, model.h, strategy.h):
 * group state and checks, the async forms of the byte and decision
 * collectives, subgroups and sync_grads in the strategy's collectives,
 * several modules in one checkpoint, the caller's own forward, SequentialLR.
 * Each method is one C API call (ddp.i's rules).
 */

%newobject DdpGroup::all_gather_uneven_async;
%newobject DdpGroup::broadcast_bytes_async;
%newobject DdpGroup::reduce_boolean_decision_async;
%newobject DdpEnv::from_vars;
%newobject DdpLrScheduler::sequential;
%newobject DdpStrategy::batch_norm;
%newobject DdpStrategy::call;

%extend DdpGroup {
  /** The timeout of later collectives (> 0). */
  void set_timeout(long long timeout_ms) { ddp_swig_check(ddp_group_set_timeout($self, timeout_ms)); }
  /** True once a timeout or a peer's failure broke the group. */
  bool is_broken() { return ddp_group_is_broken($self) != 0; }
  /** The cross-rank call checks (DDP_DEBUG=DETAIL): set on every rank alike. */
  void set_debug_detail(bool enabled) { ddp_swig_check(ddp_group_set_debug_detail($self, enabled)); }
  /** Whether the cross-rank call checks are on. */
  bool debug_detail() { return ddp_group_debug_detail($self) != 0; }
  /** all_gather_uneven without waiting: Work.result_tensor(rank) after wait. */
  DdpWork *all_gather_uneven_async(const DdpTensor *t) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_all_gather_uneven_async($self, t, &w));
    return w;
  }
  /** broadcast_bytes without waiting (the bytes are copied): Work.result_bytes. */
  DdpWork *broadcast_bytes_async(const void *CBUFFER, size_t CBUFLEN, int src) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_broadcast_bytes_async($self, CBUFFER, CBUFLEN, src, &w));
    return w;
  }
  /** reduce_boolean_decision without waiting: Work.result_decision. */
  DdpWork *reduce_boolean_decision_async(bool decision, bool all = true) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_reduce_boolean_decision_async($self, decision, all, &w));
    return w;
  }
}

%extend DdpWork {
  /** The bytes of a waited broadcast_bytes_async. */
  DdpBytes result_bytes() {
    DdpBytes out = {NULL};
    ddp_swig_check(ddp_work_result_buffer($self, &out.buf));
    return out;
  }
  /** The decision of a waited reduce_boolean_decision_async. */
  bool result_decision() {
    int out = 0;
    ddp_swig_check(ddp_work_result_decision($self, &out));
    return out != 0;
  }
}

%extend DdpEnv {
  /** The environment of "NAME=value" strings instead of the process's
   * (name None/null: detected, or "torchelastic", "slurm", ... to force one). */
  static DdpEnv *from_vars(char **STRING_ARRAY, const char *name = NULL) {
    DdpEnv *e = NULL;
    ddp_swig_check(ddp_env_from_vars(&e, (const char *const *)STRING_ARRAY, name));
    return e;
  }
}

%extend DdpLrScheduler {
  /** SequentialLR: the schedulers (made over optimizer) one after another,
   * the next taking over at each milestone (one fewer than schedulers). */
  static DdpLrScheduler *sequential(DdpOptimizer *optimizer, DdpLrScheduler **SCHEDULERS, size_t NSCHEDULERS,
                                    const int64_t *milestones, size_t num_milestones) {
    DdpLrScheduler *s = NULL;
    if (NSCHEDULERS == 0 || num_milestones + 1 != NSCHEDULERS) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "LrScheduler.sequential: one milestone fewer than schedulers");
      return NULL;
    }
    ddp_swig_check(ddp_lr_scheduler_new_sequential(&s, optimizer, SCHEDULERS, NSCHEDULERS, milestones));
    return s;
  }
}

%extend DdpStrategy {
  /** The strategy's group (valid until teardown; not freed by the binding). */
  DdpGroup *group() {
    DdpGroup *g = ddp_strategy_group($self);
    if (!g) ddp_swig_fail(DDP_E_STATE, "Strategy.group: before setup_environment");
    return g;
  }
  /** Lightning's reduce over group (None/null: the strategy's own, or a
   * subgroup of its job from group().new_subgroups). */
  void reduce(DdpTensor *t, ddp_reduce_op op = DDP_MEAN, DdpGroup *group = NULL) {
    ddp_swig_check(ddp_strategy_reduce_v2($self, t, op, group));
  }
  /** Lightning's all_gather(tensor, group, sync_grads): with sync_grads the
   * result's backward sums each rank's slice gradient over the ranks. */
  DdpTensor *all_gather(const DdpTensor *t, bool sync_grads = false, DdpGroup *group = NULL) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_strategy_all_gather_v3($self, t, sync_grads, group, &out));
    return out;
  }
  /** gather_all_tensors: one tensor per rank, first dimensions may differ. */
  DdpTensorArray all_gather_uneven(const DdpTensor *t) {
    DdpTensorArray out = {NULL, ddp_strategy_world_size($self)};
    out.items = (DdpTensor **)calloc(out.n > 0 ? (size_t)out.n : 1, sizeof(DdpTensor *));
    if (ddp_swig_check(ddp_strategy_all_gather_uneven($self, t, out.items))) {
      free(out.items);
      out.items = NULL;
    }
    return out;
  }
  /** Lightning's broadcast(obj), as bytes. */
  DdpBytes broadcast_bytes(const void *CBUFFER, size_t CBUFLEN, int src = 0) {
    DdpBytes out = {NULL};
    ddp_swig_check(ddp_strategy_broadcast_bytes($self, CBUFFER, CBUFLEN, src, &out.buf));
    return out;
  }
  /** SyncBatchNorm's forward over the strategy's group (training), or plain
   * batch_norm with the running statistics; any of the four may be None/null. */
  DdpTensor *batch_norm(const DdpTensor *input, const DdpTensor *weight, const DdpTensor *bias,
                        DdpTensor *running_mean, DdpTensor *running_var, bool training, double momentum = 0.1,
                        double eps = 1e-5) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_strategy_batch_norm($self, input, weight, bias, running_mean, running_var, training, momentum,
                                           eps, &out));
    return out;
  }
  /** Strategy.forward for any method (None/null: forward), several inputs and
   * keyword inputs, and a tensor, tuple, list or dict output. */
  DdpOutputs *call(DdpModule *module, const char *method, DdpTensor **TENSORS, size_t NTENSORS,
                   char **kw_names = NULL, DdpTensor **kw_values = NULL, size_t num_kw = 0) {
    DdpOutputs *out = NULL;
    size_t n = 0;
    while (kw_names && kw_names[n]) ++n;
    if (n != num_kw) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "Strategy.call: one keyword name per keyword value");
      return NULL;
    }
    ddp_swig_check(ddp_strategy_call_v2($self, module, method, (const ddp_tensor *const *)TENSORS, NTENSORS,
                                        (const char *const *)kw_names, (const ddp_tensor *const *)kw_values, num_kw,
                                        &out));
    return out;
  }
  /** The caller's own forward of a set-up module (from_tensors over its own
   * framework's parameters) between these two: the strategy prepares and
   * finishes the step's gradient sync around it. */
  void forward_begin(DdpModule *module) { ddp_swig_check(ddp_strategy_forward_begin($self, module)); }
  /** The end of the caller's own forward (see forward_begin). */
  void forward_end() { ddp_swig_check(ddp_strategy_forward_end($self)); }
  /** The precision's step then the model averager's; false when the gradient
   * scaler skipped the step (an inf or NaN). */
  bool optimizer_step(DdpOptimizer *opt) {
    int stepped = 0;
    ddp_swig_check(ddp_strategy_optimizer_step_v2($self, opt, &stepped));
    return stepped != 0;
  }
  /** Several modules in one checkpoint, module i's entries under prefixes[i]
   * ("generator.", ...), as a LightningModule holding them; collective. */
  void save_checkpoint_modules(const char *path, DdpModule **MODULES, size_t NMODULES, char **prefixes,
                               DdpOptimizer **OPTIMIZERS, size_t NOPTIMIZERS, DdpLrScheduler **SCHEDULERS,
                               size_t NSCHEDULERS, const ddp_checkpoint_info *info) {
    size_t n = 0;
    while (prefixes && prefixes[n]) ++n;
    if (n != NMODULES) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "checkpoint of several modules: one prefix per module");
      return;
    }
    ddp_swig_check(ddp_strategy_save_checkpoint_v3($self, path, MODULES, (const char *const *)prefixes, NMODULES,
                                                   OPTIMIZERS, NOPTIMIZERS, SCHEDULERS, NSCHEDULERS, info));
  }
  /** Every rank loads what save_checkpoint_modules wrote; the counters go into info. */
  void load_checkpoint_modules(const char *path, DdpModule **MODULES, size_t NMODULES, char **prefixes,
                               DdpOptimizer **OPTIMIZERS, size_t NOPTIMIZERS, DdpLrScheduler **SCHEDULERS,
                               size_t NSCHEDULERS, ddp_checkpoint_info *info) {
    size_t n = 0;
    while (prefixes && prefixes[n]) ++n;
    if (n != NMODULES) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "checkpoint of several modules: one prefix per module");
      return;
    }
    ddp_swig_check(ddp_strategy_load_checkpoint_v3($self, path, MODULES, (const char *const *)prefixes, NMODULES,
                                                   OPTIMIZERS, NOPTIMIZERS, SCHEDULERS, NSCHEDULERS, info, NULL));
  }
  /** Lightning's remove_checkpoint: rank 0 removes path; collective. */
  void remove_checkpoint(const char *path) { ddp_swig_check(ddp_strategy_remove_checkpoint($self, path)); }
  /** SLURM's requeue of this job from rank 0 (scontrol); collective. */
  void requeue() { ddp_swig_check(ddp_strategy_requeue($self)); }
}
