//! Module methods with several inputs ([`Outputs`]), a module's state by
//! name, and the rest of the strategy's and the group's calls: the caller's
//! own forward and optimizer step, collectives with sync_grads and
//! subgroups, several modules in one checkpoint. Each function is one C API
//! call.
use super::*;
use crate::extensions::take_buffer;
use crate::tensor::new_tensor;
use std::os::raw::c_char;

/// What a module's method returned: one tensor, a tuple or list, or a dict.
pub struct Outputs(*mut sys::ddp_outputs);

impl Outputs {
    /// How many tensors.
    pub fn len(&self) -> usize {
        unsafe { sys::ddp_outputs_count(self.0) }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `index` (a dict's in its order), with its autograd graph.
    pub fn at(&self, index: usize) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_outputs_at(self.0, index, out) })
    }

    /// A dict output's entry.
    pub fn get(&self, key: &str) -> Result<Tensor> {
        let k = cstring(key, "key")?;
        new_tensor(|out| unsafe { sys::ddp_outputs_get(self.0, k.as_ptr(), out) })
    }

    /// A dict output's keys, in order (empty for a tensor, tuple or list).
    pub fn keys(&self) -> Vec<String> {
        (0..self.len())
            .map_while(|i| {
                let k = unsafe { sys::ddp_outputs_key(self.0, i) };
                (!k.is_null()).then(|| owned_str(k))
            })
            .collect()
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        unsafe { sys::ddp_outputs_free(self.0) }
    }
}

/// Names and tensors of a call's keyword inputs, as the C API takes them.
struct CallArgs {
    _names: Vec<CString>,
    name_ptrs: Vec<*const c_char>,
    inputs: Vec<*const sys::ddp_tensor>,
    kw_values: Vec<*const sys::ddp_tensor>,
    method: Option<CString>,
}

impl CallArgs {
    fn new(method: Option<&str>, inputs: &[&Tensor], kwargs: &[(&str, &Tensor)]) -> Result<CallArgs> {
        let names = kwargs.iter().map(|(k, _)| cstring(k, "keyword")).collect::<Result<Vec<_>>>()?;
        Ok(CallArgs {
            name_ptrs: names.iter().map(|n| n.as_ptr()).collect(),
            _names: names,
            inputs: inputs.iter().map(|t| t.0 as *const _).collect(),
            kw_values: kwargs.iter().map(|(_, t)| t.0 as *const _).collect(),
            method: method.map(|m| cstring(m, "method")).transpose()?,
        })
    }

    fn method(&self) -> *const c_char {
        self.method.as_ref().map_or(ptr::null(), |m| m.as_ptr())
    }
}

impl Module {
    /// A model made of the caller's tensors by name, shared (not copied):
    /// the last `num_buffers` are buffers, the others parameters.
    pub fn from_tensors(named: &[(&str, &Tensor)], num_buffers: usize) -> Result<Module> {
        if num_buffers > named.len() {
            return Err(invalid("more buffers than tensors"));
        }
        let names = named.iter().map(|(n, _)| cstring(n, "name")).collect::<Result<Vec<_>>>()?;
        let ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let tensors: Vec<*mut sys::ddp_tensor> = named.iter().map(|(_, t)| t.0).collect();
        let is_buffer: Vec<c_int> = (0..named.len()).map(|i| (i >= named.len() - num_buffers) as c_int).collect();
        let mut m = ptr::null_mut();
        check(unsafe {
            sys::ddp_module_from_tensors(&mut m, ptrs.as_ptr(), tensors.as_ptr(), is_buffer.as_ptr(), named.len())
        })?;
        Ok(Module(m))
    }

    /// The method (None: forward) on `inputs` and keyword inputs, without the strategy.
    pub fn call(&mut self, method: Option<&str>, inputs: &[&Tensor], kwargs: &[(&str, &Tensor)]) -> Result<Outputs> {
        let a = CallArgs::new(method, inputs, kwargs)?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::ddp_module_call_v2(self.0, a.method(), a.inputs.as_ptr(), a.inputs.len(), a.name_ptrs.as_ptr(),
                                    a.kw_values.as_ptr(), a.kw_values.len(), &mut out)
        })?;
        Ok(Outputs(out))
    }

    /// Parameters and buffers in order: (dotted name, is a parameter).
    pub fn state_names(&self) -> Result<Vec<(String, bool)>> {
        let n = unsafe { sys::ddp_module_state_count(self.0) };
        (0..n)
            .map(|i| {
                let (mut name, mut is_param) = (ptr::null(), 0);
                check(unsafe { sys::ddp_module_state_name(self.0, i, &mut name, &mut is_param) })?;
                Ok((owned_str(name), is_param != 0))
            })
            .collect()
    }

    /// The parameter or buffer, sharing the module's memory.
    pub fn get(&self, name: &str) -> Result<Tensor> {
        let n = cstring(name, "name")?;
        new_tensor(|out| unsafe { sys::ddp_module_get(self.0, n.as_ptr(), out) })
    }

    /// A parameter's gradient, sharing memory (None when it has none).
    pub fn grad(&self, name: &str) -> Result<Option<Tensor>> {
        let n = cstring(name, "name")?;
        let t = new_tensor(|out| unsafe { sys::ddp_module_grad(self.0, n.as_ptr(), out) })?;
        Ok(if t.0.is_null() { None } else { Some(t) })
    }

    /// Copies `value` into the parameter or buffer.
    pub fn set(&mut self, name: &str, value: &Tensor) -> Result<()> {
        let n = cstring(name, "name")?;
        check(unsafe { sys::ddp_module_set(self.0, n.as_ptr(), value.0) })
    }

    /// TorchScript, for torch.jit.load.
    pub fn save(&self, path: &str) -> Result<()> {
        let p = cstring(path, "path")?;
        check(unsafe { sys::ddp_module_save(self.0, p.as_ptr()) })
    }

    /// torch.save(module.state_dict()).
    pub fn save_state_dict(&self, path: &str) -> Result<()> {
        let p = cstring(path, "path")?;
        check(unsafe { sys::ddp_module_save_state_dict(self.0, p.as_ptr()) })
    }

    /// load_state_dict(strict=True).
    pub fn load_state_dict(&mut self, path: &str) -> Result<()> {
        let p = cstring(path, "path")?;
        check(unsafe { sys::ddp_module_load_state_dict(self.0, p.as_ptr(), 1) })
    }

    /// load_state_dict(strict=False); returns what it skipped (missing and unexpected keys).
    pub fn load_state_dict_nonstrict(&mut self, path: &str) -> Result<String> {
        let p = cstring(path, "path")?;
        let mut skipped = ptr::null_mut();
        check(unsafe { sys::ddp_module_load_state_dict_nonstrict(self.0, p.as_ptr(), &mut skipped) })?;
        Ok(String::from_utf8_lossy(&take_buffer(skipped)).into_owned())
    }
}

impl Strategy {
    /// The strategy's forward of a module on a tensor.
    pub fn forward(&mut self, module: &mut Module, input: &Tensor) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_strategy_forward(self.0, module.0, input.0, out) })
    }

    /// Strategy::forward for any method (None: forward), several and keyword inputs.
    pub fn call(&mut self, module: &mut Module, method: Option<&str>, inputs: &[&Tensor],
                kwargs: &[(&str, &Tensor)]) -> Result<Outputs> {
        let a = CallArgs::new(method, inputs, kwargs)?;
        let mut out = ptr::null_mut();
        check(unsafe {
            sys::ddp_strategy_call_v2(self.0, module.0, a.method(), a.inputs.as_ptr(), a.inputs.len(),
                                      a.name_ptrs.as_ptr(), a.kw_values.as_ptr(), a.kw_values.len(), &mut out)
        })?;
        Ok(Outputs(out))
    }

    /// loss.backward() with the gradients averaged over the ranks; collective.
    pub fn backward(&mut self, loss: &Tensor) -> Result<()> {
        check(unsafe { sys::ddp_strategy_backward(self.0, loss.0) })
    }

    /// The precision's step then the model averager's; false when the gradient scaler skipped it.
    pub fn optimizer_step(&mut self, optimizer: &mut Optimizer) -> Result<bool> {
        let mut stepped = 0;
        check(unsafe { sys::ddp_strategy_optimizer_step_v2(self.0, optimizer.0, &mut stepped) })?;
        Ok(stepped != 0)
    }

    /// The caller's own forward of a set-up module happens between this and [`Strategy::forward_end`].
    pub fn forward_begin(&mut self, module: &mut Module) -> Result<()> {
        check(unsafe { sys::ddp_strategy_forward_begin(self.0, module.0) })
    }

    /// Ends the caller's own forward.
    pub fn forward_end(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_strategy_forward_end(self.0) })
    }

    /// Lightning's all_gather(tensor, sync_grads) over the strategy's group: world x shape.
    pub fn all_gather(&mut self, input: &Tensor, sync_grads: bool) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_strategy_all_gather_v3(self.0, input.0, sync_grads as c_int, ptr::null_mut(), out) })
    }

    /// Lightning's reduce of a tensor over `group` (None: the strategy's own, or a subgroup of its job).
    pub fn reduce_tensor(&mut self, t: &mut Tensor, op: ReduceOp, group: Option<&Group>) -> Result<()> {
        let g = group.map_or(ptr::null_mut(), |g| g.0);
        check(unsafe { sys::ddp_strategy_reduce_v2(self.0, t.0, op.raw(), g) })
    }

    /// Lightning's broadcast(obj) of bytes from `src`.
    pub fn broadcast_bytes(&mut self, data: &[u8], src: i32) -> Result<Vec<u8>> {
        let mut buf = ptr::null_mut();
        check(unsafe { sys::ddp_strategy_broadcast_bytes(self.0, data.as_ptr() as *const c_void, data.len(), src, &mut buf) })?;
        Ok(take_buffer(buf))
    }

    /// gather_all_tensors: one tensor per rank, first dimensions may differ.
    pub fn all_gather_uneven(&mut self, input: &Tensor) -> Result<Vec<Tensor>> {
        let n = self.world_size().max(0) as usize;
        let mut out = vec![ptr::null_mut(); n];
        check(unsafe { sys::ddp_strategy_all_gather_uneven(self.0, input.0, out.as_mut_ptr()) })?;
        Ok(out.into_iter().map(Tensor).collect())
    }

    /// Lightning's reduce_boolean_decision (all, or any with `all` false).
    pub fn reduce_boolean_decision(&mut self, decision: bool, all: bool) -> Result<bool> {
        let mut out = 0;
        check(unsafe { sys::ddp_strategy_reduce_boolean_decision(self.0, decision as c_int, all as c_int, &mut out) })?;
        Ok(out != 0)
    }

    /// SyncBatchNorm's forward over the group (training), or batch_norm with the running statistics.
    #[allow(clippy::too_many_arguments)]
    pub fn batch_norm(&mut self, input: &Tensor, weight: Option<&Tensor>, bias: Option<&Tensor>,
                      running_mean: Option<&mut Tensor>, running_var: Option<&mut Tensor>, training: bool,
                      momentum: f64, eps: f64) -> Result<Tensor> {
        let (w, b) = (weight.map_or(ptr::null(), |t| t.0 as *const _), bias.map_or(ptr::null(), |t| t.0 as *const _));
        let (m, v) = (running_mean.map_or(ptr::null_mut(), |t| t.0), running_var.map_or(ptr::null_mut(), |t| t.0));
        new_tensor(|out| unsafe {
            sys::ddp_strategy_batch_norm(self.0, input.0, w, b, m, v, training as c_int, momentum, eps, out)
        })
    }

    /// Lightning's block_backward_sync (no_sync): while on, gradients accumulate locally.
    pub fn block_backward_sync(&mut self, on: bool) -> Result<()> {
        check(unsafe { sys::ddp_strategy_block_backward_sync(self.0, on as c_int) })
    }

    /// PyTorch's Join: this rank is out of batches (options' join_enabled).
    pub fn join(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_strategy_join(self.0) })
    }

    /// The module as TorchScript from global rank 0; collective.
    pub fn save_module(&mut self, path: &str, module: &Module) -> Result<()> {
        let p = cstring(path, "path")?;
        check(unsafe { sys::ddp_strategy_save_module(self.0, p.as_ptr(), module.0) })
    }

    /// Lightning's remove_checkpoint from rank 0; collective.
    pub fn remove_checkpoint(&mut self, path: &str) -> Result<()> {
        let p = cstring(path, "path")?;
        check(unsafe { sys::ddp_strategy_remove_checkpoint(self.0, p.as_ptr()) })
    }

    /// Whether SLURM's requeue signal came (any rank); collective.
    pub fn requeue_requested(&mut self) -> Result<bool> {
        let mut out = 0;
        check(unsafe { sys::ddp_strategy_requeue_requested(self.0, &mut out) })?;
        Ok(out != 0)
    }

    /// scontrol requeue of this job from rank 0; collective.
    pub fn requeue(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_strategy_requeue(self.0) })
    }

    /// The precision ("32-true", "bf16-mixed", ...).
    pub fn precision(&self) -> String {
        owned_str(unsafe { sys::ddp_strategy_precision(self.0) })
    }

    /// Processes on this node.
    pub fn devices(&self) -> i32 {
        unsafe { sys::ddp_strategy_devices(self.0) }
    }

    /// This process's rank on its node.
    pub fn local_rank(&self) -> i32 {
        unsafe { sys::ddp_strategy_local_rank(self.0) }
    }

    /// This node's rank.
    pub fn node_rank(&self) -> i32 {
        unsafe { sys::ddp_strategy_node_rank(self.0) }
    }

    /// Runs `f` with the strategy's own group (after setup), e.g. to make subgroups.
    pub fn with_group<R>(&mut self, f: impl FnOnce(&Group) -> R) -> Result<R> {
        let g = unsafe { sys::ddp_strategy_group(self.0) };
        if g.is_null() {
            return Err(Error { status: sys::DDP_E_STATE, message: "the strategy is not set up".into() });
        }
        let borrowed = std::mem::ManuallyDrop::new(Group(g)); // the strategy frees it
        Ok(f(&borrowed))
    }
}

impl Group {
    /// "shm", "gloo" or "nccl".
    pub fn backend(&self) -> String {
        owned_str(unsafe { sys::ddp_group_backend(self.0) })
    }

    /// The timeout of its collectives.
    pub fn timeout_ms(&self) -> i64 {
        unsafe { sys::ddp_group_timeout_ms(self.0) }
    }

    /// Changes the timeout of later collectives (> 0).
    pub fn set_timeout(&self, timeout_ms: i64) -> Result<()> {
        check(unsafe { sys::ddp_group_set_timeout(self.0, timeout_ms) })
    }

    /// Whether a timeout or a peer's failure broke it.
    pub fn is_broken(&self) -> bool {
        unsafe { sys::ddp_group_is_broken(self.0) != 0 }
    }

    /// The cross-rank call checks (DDP_DEBUG=DETAIL); set on every rank alike.
    pub fn set_debug_detail(&self, enabled: bool) -> Result<()> {
        check(unsafe { sys::ddp_group_set_debug_detail(self.0, enabled as c_int) })
    }

    /// Whether the cross-rank call checks are on.
    pub fn debug_detail(&self) -> bool {
        unsafe { sys::ddp_group_debug_detail(self.0) != 0 }
    }

    /// Every rank's `data`, stacked: world x data.len().
    pub fn all_gather<T: Element>(&self, data: &mut [T]) -> Result<Vec<T>> {
        let t = Tensor::view(data)?;
        new_tensor(|out| unsafe { sys::ddp_all_gather(self.0, t.0, out) })?.copy_out()
    }

    /// PyTorch's all_gather_into_tensor: every rank's `data` into the caller's `out`
    /// (world x data.len() elements, rank r's at r x data.len()); nothing is allocated.
    pub fn all_gather_into<T: Element>(&self, data: &mut [T], out: &mut [T]) -> Result<()> {
        let t = Tensor::view(data)?;
        let o = Tensor::view(out)?;
        check(unsafe { sys::ddp_all_gather_into_tensor(self.0, t.0, o.0) })
    }

    /// Reduces `data` onto rank `dst`.
    pub fn reduce<T: Element>(&self, data: &mut [T], dst: i32, op: ReduceOp) -> Result<()> {
        let t = Tensor::view(data)?;
        check(unsafe { sys::ddp_reduce(self.0, t.0, dst, op.raw()) })
    }

    /// A collective of tensors (libddp's own): all_reduce in place.
    pub fn all_reduce_tensor(&self, t: &mut Tensor, op: ReduceOp) -> Result<()> {
        check(unsafe { sys::ddp_all_reduce(self.0, t.0, op.raw()) })
    }
}

/// The state of one [`Strategy::optimizer_step_fn`] call: the caller's step and its error.
struct StepCall<'f> {
    step: &'f mut dyn FnMut() -> Result<()>,
    error: Option<Error>,
}

unsafe extern "C" fn step_trampoline(user: *mut c_void) -> c_int {
    let call = &mut *(user as *mut StepCall<'_>);
    // A panic must not unwind through C: it becomes this call's error.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (call.step)())) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            call.error = Some(e);
            1
        }
        Err(_) => {
            call.error = Some(Error { status: sys::DDP_E_INTERNAL, message: "the optimizer step panicked".into() });
            1
        }
    }
}

impl Strategy {
    /// Where the strategy's module runs: (CUDA, device index); (false, 0) on the CPU.
    pub fn root_device(&self) -> (bool, i32) {
        let d = unsafe { sys::ddp_strategy_root_device(self.0) };
        (d.type_ == sys::DDP_DEVICE_CUDA, d.index)
    }

    /// Lightning's warning about the precision ("" when none).
    pub fn precision_warning(&self) -> String {
        owned_str(unsafe { sys::ddp_strategy_precision_warning(self.0) })
    }

    /// Batch norm layers set up as SyncBatchNorm (options' sync_batchnorm).
    pub fn sync_batchnorm_layers(&self) -> i32 {
        unsafe { sys::ddp_strategy_sync_batchnorm_layers(self.0) }
    }

    /// The precision's step (unscale, clip, skipped on an inf or NaN) around
    /// the caller's own optimizer step `step` (e.g. a tch optimizer's), then
    /// the model averager's; returns whether `step` ran. Its error (or a
    /// panic, as DDP_E_INTERNAL) comes back as this call's.
    pub fn optimizer_step_fn(&mut self, step: &mut dyn FnMut() -> Result<()>) -> Result<bool> {
        let mut call = StepCall { step, error: None };
        let mut stepped = 0;
        let status = unsafe {
            sys::ddp_strategy_optimizer_step_fn(self.0, Some(step_trampoline), &mut call as *mut StepCall<'_> as *mut c_void,
                                                &mut stepped)
        };
        if let Some(e) = call.error {
            return Err(e);
        }
        check(status)?;
        Ok(stepped != 0)
    }

    /// Several modules in one checkpoint, each under its prefix ("generator.", ...),
    /// as a LightningModule holding them keeps them; collective.
    pub fn save_checkpoint_modules(&mut self, path: &str, modules: &[(&str, &Module)], optimizers: &[&Optimizer],
                                   schedulers: &[&LrScheduler], info: &CheckpointInfo) -> Result<()> {
        let a = CheckpointArgs::new(path, modules.iter().map(|(n, m)| (*n, m.0)), optimizers.iter().map(|o| o.0),
                                    schedulers.iter().map(|s| s.raw))?;
        let raw = info.raw();
        check(unsafe {
            sys::ddp_strategy_save_checkpoint_v3(self.0, a.path.as_ptr(), a.modules.as_ptr(), a.prefix_ptrs.as_ptr(),
                                                 a.modules.len(), a.optimizers.as_ptr(), a.optimizers.len(),
                                                 a.schedulers.as_ptr(), a.schedulers.len(), &raw)
        })
    }

    /// Every rank loads what [`Strategy::save_checkpoint_modules`] wrote; returns the counters.
    pub fn load_checkpoint_modules(&mut self, path: &str, modules: &mut [(&str, &mut Module)],
                                   optimizers: &mut [&mut Optimizer], schedulers: &mut [&mut LrScheduler])
                                   -> Result<CheckpointInfo> {
        let a = CheckpointArgs::new(path, modules.iter().map(|(n, m)| (*n, m.0)), optimizers.iter().map(|o| o.0),
                                    schedulers.iter().map(|s| s.raw))?;
        let mut raw = CheckpointInfo::default().raw();
        check(unsafe {
            sys::ddp_strategy_load_checkpoint_v3(self.0, a.path.as_ptr(), a.modules.as_ptr(), a.prefix_ptrs.as_ptr(),
                                                 a.modules.len(), a.optimizers.as_ptr(), a.optimizers.len(),
                                                 a.schedulers.as_ptr(), a.schedulers.len(), &mut raw, ptr::null_mut())
        })?;
        Ok(CheckpointInfo {
            step: raw.step,
            epoch: raw.epoch,
            batches_in_epoch: raw.batches_in_epoch,
            samples_in_epoch: raw.samples_in_epoch,
        })
    }
}

/// The arrays a multi-module checkpoint call takes, with the strings they point into.
struct CheckpointArgs {
    path: CString,
    _prefixes: Vec<CString>,
    prefix_ptrs: Vec<*const c_char>,
    modules: Vec<*mut sys::ddp_module>,
    optimizers: Vec<*mut sys::ddp_optimizer>,
    schedulers: Vec<*mut sys::ddp_lr_scheduler>,
}

impl CheckpointArgs {
    fn new<'a>(path: &str, modules: impl Iterator<Item = (&'a str, *mut sys::ddp_module)>,
               optimizers: impl Iterator<Item = *mut sys::ddp_optimizer>,
               schedulers: impl Iterator<Item = *mut sys::ddp_lr_scheduler>) -> Result<CheckpointArgs> {
        let (names, modules): (Vec<&str>, Vec<_>) = modules.unzip();
        let prefixes = names.iter().map(|n| cstring(n, "prefix")).collect::<Result<Vec<_>>>()?;
        Ok(CheckpointArgs {
            path: cstring(path, "path")?,
            prefix_ptrs: prefixes.iter().map(|p| p.as_ptr()).collect(),
            _prefixes: prefixes,
            modules,
            optimizers: optimizers.collect(),
            schedulers: schedulers.collect(),
        })
    }
}
