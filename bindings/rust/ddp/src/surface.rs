//! The training surface as Rust values: [`Tensor`] with arithmetic and
//! autograd, every loss, the grad mode and seeding, module methods with
//! several inputs ([`Outputs`]), parameter groups, the learning-rate
//! schedulers, Lightning's logged [`Metric`], and the rest of the strategy's
//! and the group's calls. Each function is one C API call; libddp (ATen)
//! computes every value.
use super::*;
use crate::extensions::take_buffer;
use std::ops;
use std::os::raw::c_char;

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid(&format!("{what} contains NUL")))
}

fn new_tensor(f: impl FnOnce(*mut *mut sys::ddp_tensor) -> sys::ddp_status) -> Result<Tensor> {
    let mut out = ptr::null_mut();
    check(f(&mut out))?;
    Ok(Tensor(out))
}

/// Element-wise operators of two operands (`ddp_binary_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// a + b
    Add,
    /// a - b
    Sub,
    /// a * b
    Mul,
    /// a / b (true division)
    Div,
    /// a ** b
    Pow,
    /// torch.maximum (with a scalar: clamp(min=))
    Maximum,
    /// torch.minimum (with a scalar: clamp(max=))
    Minimum,
}

/// Element-wise functions of one operand (`ddp_unary_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// -a
    Neg,
    /// exp
    Exp,
    /// natural log
    Log,
    /// square root
    Sqrt,
    /// absolute value
    Abs,
    /// a * a
    Square,
    /// max(a, 0)
    Relu,
    /// 1 / (1 + exp(-a))
    Sigmoid,
    /// tanh
    Tanh,
    /// log(1 + a)
    Log1p,
    /// sine
    Sin,
    /// cosine
    Cos,
}

impl BinaryOp {
    fn raw(self) -> sys::ddp_binary_op {
        self as sys::ddp_binary_op // declared in the header's order
    }
}

impl UnaryOp {
    fn raw(self) -> sys::ddp_unary_op {
        self as sys::ddp_unary_op // declared in the header's order
    }
}

/// A libddp tensor (an ATen tensor on the CPU, or CUDA where libddp was
/// built with it): owned, freed on drop. Results of arithmetic keep their
/// autograd graph; [`Tensor::backward`] fills the leaves' gradients.
pub struct Tensor(pub(crate) *mut sys::ddp_tensor);

// SAFETY: tensor.h: a tensor may move between threads; one thread uses it at a time.
unsafe impl Send for Tensor {}

impl Tensor {
    /// A new CPU tensor holding a copy of `data` with `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: &[i64]) -> Result<Tensor> {
        if !shape_fits(shape, data.len()) {
            return Err(invalid("the shape does not match the data's length"));
        }
        let cpu = sys::ddp_device { type_: sys::DDP_DEVICE_CPU, index: 0 };
        let t = new_tensor(|out| unsafe { sys::ddp_tensor_new(out, T::DTYPE, shape.as_ptr(), shape.len(), cpu) })?;
        let bytes = std::mem::size_of_val(data);
        check(unsafe { sys::ddp_tensor_copy_from(t.0, data.as_ptr() as *const c_void, bytes) })?;
        Ok(t)
    }

    /// A copy of the elements (`T` must be the tensor's element type).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.copy_out()
    }

    /// The sizes of its dimensions.
    pub fn shape(&self) -> Vec<i64> {
        let n = unsafe { sys::ddp_tensor_ndim(self.0) };
        let p = unsafe { sys::ddp_tensor_shape(self.0) };
        if p.is_null() {
            return Vec::new();
        }
        unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
    }

    /// The number of elements.
    pub fn numel(&self) -> i64 {
        unsafe { sys::ddp_tensor_numel(self.0) }
    }

    /// The size of its elements in bytes.
    pub fn nbytes(&self) -> usize {
        unsafe { sys::ddp_tensor_nbytes(self.0) }
    }

    /// A copy in new memory outside the autograd graph (clone().detach()).
    pub fn detached(&self) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_tensor_clone(self.0, out) })
    }

    /// The value of a one-element tensor (torch's item()).
    pub fn item(&self) -> Result<f64> {
        let mut v = 0.0;
        check(unsafe { sys::ddp_tensor_item(self.0, &mut v) })?;
        Ok(v)
    }

    /// self (op) other, element-wise with broadcasting.
    pub fn binary(&self, op: BinaryOp, other: &Tensor) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_tensor_binary(op.raw(), self.0, other.0, out) })
    }

    /// self (op) scalar.
    pub fn binary_scalar(&self, op: BinaryOp, scalar: f64) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_tensor_binary_scalar(op.raw(), self.0, scalar, out) })
    }

    /// op(self), element-wise.
    pub fn unary(&self, op: UnaryOp) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_tensor_unary(op.raw(), self.0, out) })
    }

    /// The sum over `dims` (empty: every dimension, a 0-d tensor).
    pub fn sum(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let d = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        new_tensor(|out| unsafe { sys::ddp_tensor_sum(self.0, d, dims.len(), keepdim as c_int, out) })
    }

    /// The mean over `dims` (empty: every dimension).
    pub fn mean(&self, dims: &[i64], keepdim: bool) -> Result<Tensor> {
        let d = if dims.is_empty() { ptr::null() } else { dims.as_ptr() };
        new_tensor(|out| unsafe { sys::ddp_tensor_mean(self.0, d, dims.len(), keepdim as c_int, out) })
    }

    /// softmax, or log_softmax with `log`, along `dim` (negative: from the end).
    pub fn softmax(&self, dim: i64, log: bool) -> Result<Tensor> {
        new_tensor(|out| unsafe { sys::ddp_tensor_softmax(self.0, dim, log as c_int, out) })
    }

    /// Autograd's backward from this one-element tensor on this process
    /// only ([`Strategy::backward`] averages over the ranks).
    pub fn backward(&self) -> Result<()> {
        check(unsafe { sys::ddp_tensor_backward(self.0) })
    }

    /// The gradient autograd accumulated into this leaf (None before any).
    pub fn grad(&self) -> Result<Option<Tensor>> {
        let t = new_tensor(|out| unsafe { sys::ddp_tensor_grad(self.0, out) })?;
        Ok(if t.0.is_null() { None } else { Some(t) })
    }

    /// Whether it is in an autograd graph.
    pub fn requires_grad(&self) -> bool {
        unsafe { sys::ddp_tensor_requires_grad(self.0) != 0 }
    }

    /// Makes a floating-point tensor a leaf whose gradient autograd computes.
    pub fn set_requires_grad(&mut self, on: bool) -> Result<()> {
        check(unsafe { sys::ddp_tensor_set_requires_grad(self.0, on as c_int) })
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { sys::ddp_tensor_free(self.0) }
    }
}

macro_rules! operator {
    ($trait:ident, $method:ident, $op:ident) => {
        impl ops::$trait<&Tensor> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, other: &Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, other)
            }
        }
        impl ops::$trait<f64> for &Tensor {
            type Output = Result<Tensor>;
            fn $method(self, scalar: f64) -> Result<Tensor> {
                self.binary_scalar(BinaryOp::$op, scalar)
            }
        }
    };
}
operator!(Add, add, Add);
operator!(Sub, sub, Sub);
operator!(Mul, mul, Mul);
operator!(Div, div, Div);

impl ops::Neg for &Tensor {
    type Output = Result<Tensor>;
    fn neg(self) -> Result<Tensor> {
        self.unary(UnaryOp::Neg)
    }
}

/// torch.set_grad_enabled for the calling thread; returns the previous mode.
pub fn set_grad_enabled(enabled: bool) -> Result<bool> {
    let mut previous = 1;
    check(unsafe { sys::ddp_grad_set_enabled(enabled as c_int, &mut previous) })?;
    Ok(previous != 0)
}

/// Whether the calling thread records autograd graphs.
pub fn is_grad_enabled() -> bool {
    unsafe { sys::ddp_grad_is_enabled() != 0 }
}

/// Lightning's seed_everything(seed, workers); returns the seed used.
pub fn seed_everything(seed: i64, workers: bool) -> Result<i64> {
    let mut used = 0;
    check(unsafe { sys::ddp_seed_everything(seed, workers as c_int, &mut used) })?;
    Ok(used)
}

/// Lightning's reset_seed(): true when PL_GLOBAL_SEED was set and used.
pub fn reset_seed() -> Result<bool> {
    let mut seeded = 0;
    check(unsafe { sys::ddp_reset_seed(&mut seeded) })?;
    Ok(seeded != 0)
}

/// The Trainer's deterministic flag (torch.use_deterministic_algorithms).
pub fn set_deterministic(on: bool, warn_only: bool) -> Result<()> {
    check(unsafe { sys::ddp_set_deterministic(on as c_int, warn_only as c_int) })
}

/// Whether deterministic algorithms are on.
pub fn is_deterministic() -> bool {
    unsafe { sys::ddp_is_deterministic() != 0 }
}

/// torch.nn.functional's losses (`ddp_loss_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossKind {
    /// mse_loss
    Mse,
    /// cross_entropy (class indices, or class probabilities)
    CrossEntropy,
    /// binary_cross_entropy_with_logits
    BceWithLogits,
    /// l1_loss
    L1,
    /// smooth_l1_loss
    SmoothL1,
    /// huber_loss
    Huber,
    /// nll_loss
    Nll,
    /// kl_div
    KlDiv,
}

/// torch's reduction= argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The mean (the default).
    Mean,
    /// The sum.
    Sum,
    /// One loss per element (per row for cross entropy and NLL).
    None,
    /// kl_div only: the sum divided by the batch size.
    BatchMean,
}

/// A loss and its arguments with PyTorch's defaults (`LossOptions::new(kind)`).
pub struct LossOptions<'t> {
    /// The reduction.
    pub reduction: Reduction,
    /// Cross entropy, NLL: one weight per class; BCE with logits: broadcast over the input.
    pub weight: Option<&'t Tensor>,
    /// Cross entropy, NLL: rows of this class count for nothing.
    pub ignore_index: i64,
    /// Cross entropy, in [0, 1].
    pub label_smoothing: f64,
    /// BCE with logits: one per class.
    pub pos_weight: Option<&'t Tensor>,
    /// Smooth L1's beta.
    pub beta: f64,
    /// Huber's delta.
    pub delta: f64,
    /// KL divergence: the target is log-probabilities.
    pub log_target: bool,
    kind: LossKind,
}

impl<'t> LossOptions<'t> {
    /// `kind` with torch's defaults.
    pub fn new(kind: LossKind) -> LossOptions<'t> {
        LossOptions {
            kind,
            reduction: Reduction::Mean,
            weight: None,
            ignore_index: -100,
            label_smoothing: 0.0,
            pos_weight: None,
            beta: 1.0,
            delta: 1.0,
            log_target: false,
        }
    }

    /// The loss of `input` against `target` (ATen's kernel: value and gradient are PyTorch's).
    pub fn compute(&self, input: &Tensor, target: &Tensor) -> Result<Tensor> {
        let o = sys::ddp_loss_options {
            version: sys::DDP_LOSS_OPTIONS_VERSION,
            kind: self.kind as sys::ddp_loss_kind,
            reduction: self.reduction as sys::ddp_loss_reduction,
            weight: self.weight.map_or(ptr::null(), |t| t.0),
            ignore_index: self.ignore_index,
            label_smoothing: self.label_smoothing,
            pos_weight: self.pos_weight.map_or(ptr::null(), |t| t.0),
            beta: self.beta,
            delta: self.delta,
            log_target: self.log_target as c_int,
        };
        new_tensor(|out| unsafe { sys::ddp_loss_compute(&o, input.0, target.0, out) })
    }
}

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
                (!k.is_null()).then(|| unsafe { CStr::from_ptr(k) }.to_string_lossy().into_owned())
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
                Ok((unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned(), is_param != 0))
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

/// One of torch.optim's parameter groups by name patterns (fnmatch over
/// the dotted names; no patterns: the rest); None leaves a hyper-parameter
/// to the optimizer's.
#[derive(Debug, Clone, Default)]
pub struct ParamGroup {
    /// Name patterns ("*.bias", "norm*").
    pub patterns: Vec<String>,
    /// The group's learning rate.
    pub lr: Option<f64>,
    /// The group's weight decay.
    pub weight_decay: Option<f64>,
    /// The group's momentum (SGD).
    pub momentum: Option<f64>,
}

/// The optimizers' kinds with torch.optim's arguments of the same names.
#[allow(missing_docs)] // each field is the torch.optim argument it is named after
#[derive(Debug, Clone, Copy)]
pub enum OptimizerKind {
    /// torch.optim.SGD
    Sgd { lr: f64, momentum: f64, dampening: f64, weight_decay: f64, nesterov: bool },
    /// torch.optim.Adam
    Adam { lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64, amsgrad: bool },
    /// torch.optim.AdamW
    AdamW { lr: f64, beta1: f64, beta2: f64, eps: f64, weight_decay: f64, amsgrad: bool },
}

impl Optimizer {
    /// An optimizer over the module's parameters in `groups` (empty: one group of all).
    pub fn with_groups(module: &mut Module, kind: OptimizerKind, groups: &[ParamGroup]) -> Result<Optimizer> {
        let patterns = groups
            .iter()
            .map(|g| g.patterns.iter().map(|p| cstring(p, "pattern")).collect::<Result<Vec<_>>>())
            .collect::<Result<Vec<_>>>()?;
        let pattern_ptrs: Vec<Vec<*const c_char>> =
            patterns.iter().map(|ps| ps.iter().map(|p| p.as_ptr()).collect()).collect();
        let raw: Vec<sys::ddp_param_group> = groups
            .iter()
            .zip(&pattern_ptrs)
            .map(|(g, ps)| sys::ddp_param_group {
                version: sys::DDP_PARAM_GROUP_VERSION,
                patterns: if ps.is_empty() { ptr::null() } else { ps.as_ptr() },
                num_patterns: ps.len(),
                lr: g.lr.unwrap_or(sys::DDP_INHERIT),
                weight_decay: g.weight_decay.unwrap_or(sys::DDP_INHERIT),
                momentum: g.momentum.unwrap_or(sys::DDP_INHERIT),
            })
            .collect();
        let mut opt = ptr::null_mut();
        let m = module.0;
        let status = match kind {
            OptimizerKind::Sgd { lr, momentum, dampening, weight_decay, nesterov } => {
                let o = sys::ddp_sgd_options {
                    version: sys::DDP_SGD_OPTIONS_VERSION,
                    lr,
                    momentum,
                    dampening,
                    weight_decay,
                    nesterov: nesterov as c_int,
                };
                if raw.is_empty() {
                    unsafe { sys::ddp_optimizer_new_sgd(&mut opt, m, &o) }
                } else {
                    unsafe { sys::ddp_optimizer_new_sgd_groups(&mut opt, m, &o, raw.as_ptr(), raw.len()) }
                }
            }
            OptimizerKind::Adam { lr, beta1, beta2, eps, weight_decay, amsgrad }
            | OptimizerKind::AdamW { lr, beta1, beta2, eps, weight_decay, amsgrad } => {
                let o = sys::ddp_adam_options {
                    version: sys::DDP_ADAM_OPTIONS_VERSION,
                    lr,
                    beta1,
                    beta2,
                    eps,
                    weight_decay,
                    amsgrad: amsgrad as c_int,
                };
                let adamw = matches!(kind, OptimizerKind::AdamW { .. });
                match (adamw, raw.is_empty()) {
                    (false, true) => unsafe { sys::ddp_optimizer_new_adam(&mut opt, m, &o) },
                    (false, false) => unsafe { sys::ddp_optimizer_new_adam_groups(&mut opt, m, &o, raw.as_ptr(), raw.len()) },
                    (true, true) => unsafe { sys::ddp_optimizer_new_adamw(&mut opt, m, &o) },
                    (true, false) => unsafe { sys::ddp_optimizer_new_adamw_groups(&mut opt, m, &o, raw.as_ptr(), raw.len()) },
                }
            }
        };
        check(status)?;
        Ok(Optimizer(opt))
    }

    /// The number of parameter groups.
    pub fn num_groups(&self) -> usize {
        unsafe { sys::ddp_optimizer_num_groups(self.0) }
    }

    /// A group's learning rate.
    pub fn group_lr(&self, group: usize) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::ddp_optimizer_group_lr(self.0, group, &mut lr) })?;
        Ok(lr)
    }

    /// Sets a group's learning rate.
    pub fn set_group_lr(&mut self, group: usize, lr: f64) -> Result<()> {
        check(unsafe { sys::ddp_optimizer_set_group_lr(self.0, group, lr) })
    }

    /// The first group's learning rate.
    pub fn lr(&self) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::ddp_optimizer_lr(self.0, &mut lr) })?;
        Ok(lr)
    }

    /// Sets every group's learning rate.
    pub fn set_lr(&mut self, lr: f64) -> Result<()> {
        check(unsafe { sys::ddp_optimizer_set_lr(self.0, lr) })
    }

    /// optimizer.zero_grad().
    pub fn zero_grad(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_optimizer_zero_grad(self.0) })
    }
}

/// torch.optim.lr_scheduler's schedulers; the options are the C API's
/// (`LrScheduler::defaults(kind)` gives torch's defaults).
pub struct LrScheduler {
    raw: *mut sys::ddp_lr_scheduler,
    _parts: Vec<LrScheduler>, // a SequentialLR's schedulers
}

unsafe impl Send for LrScheduler {}

/// The schedulers' options (`ddp_lr_scheduler_options`).
pub type LrSchedulerOptions = sys::ddp_lr_scheduler_options;

/// torch's scheduler kinds (`ddp_lr_scheduler_kind`).
pub use sys::{
    DDP_LR_COSINE_ANNEALING, DDP_LR_EXPONENTIAL, DDP_LR_LINEAR, DDP_LR_MULTI_STEP, DDP_LR_ONE_CYCLE,
    DDP_LR_REDUCE_ON_PLATEAU, DDP_LR_STEP,
};

impl LrScheduler {
    /// The options of `kind` with torch's defaults: the header's
    /// DDP_LR_SCHEDULER_OPTIONS_INIT, field for field (a macro, which Rust cannot call).
    pub fn defaults(kind: sys::ddp_lr_scheduler_kind) -> LrSchedulerOptions {
        LrSchedulerOptions {
            version: sys::DDP_LR_SCHEDULER_OPTIONS_VERSION,
            kind,
            step_size: 1,
            milestones: ptr::null(),
            num_milestones: 0,
            gamma: 0.1,
            t_max: 1,
            eta_min: 0.0,
            start_factor: 1.0 / 3.0,
            end_factor: 1.0,
            total_iters: 5,
            max_lr: 0.0,
            total_steps: 0,
            pct_start: 0.3,
            anneal_linear: 0,
            cycle_momentum: 1,
            base_momentum: 0.85,
            max_momentum: 0.95,
            div_factor: 25.0,
            final_div_factor: 1e4,
            three_phase: 0,
            mode_max: 0,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_abs: 0,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
        }
    }

    /// A scheduler over `optimizer`.
    pub fn new(optimizer: &mut Optimizer, options: &LrSchedulerOptions) -> Result<LrScheduler> {
        let mut s = ptr::null_mut();
        check(unsafe { sys::ddp_lr_scheduler_new(&mut s, optimizer.0, options) })?;
        Ok(LrScheduler { raw: s, _parts: Vec::new() })
    }

    /// SequentialLR: `parts` (made over `optimizer`) one after another, the
    /// next taking over at each milestone (one fewer than parts).
    pub fn sequential(optimizer: &mut Optimizer, parts: Vec<LrScheduler>, milestones: &[i64]) -> Result<LrScheduler> {
        if parts.is_empty() || milestones.len() + 1 != parts.len() {
            return Err(invalid("SequentialLR needs one milestone fewer than schedulers"));
        }
        let raws: Vec<*mut sys::ddp_lr_scheduler> = parts.iter().map(|p| p.raw).collect();
        let mut s = ptr::null_mut();
        check(unsafe {
            sys::ddp_lr_scheduler_new_sequential(&mut s, optimizer.0, raws.as_ptr(), raws.len(), milestones.as_ptr())
        })?;
        Ok(LrScheduler { raw: s, _parts: parts })
    }

    /// scheduler.step().
    pub fn step(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_lr_scheduler_step(self.raw) })
    }

    /// ReduceLROnPlateau's step(metric).
    pub fn step_metric(&mut self, metric: f64) -> Result<()> {
        check(unsafe { sys::ddp_lr_scheduler_step_metric(self.raw, metric) })
    }

    /// get_last_lr()[0].
    pub fn last_lr(&self) -> Result<f64> {
        let mut lr = 0.0;
        check(unsafe { sys::ddp_lr_scheduler_last_lr(self.raw, &mut lr) })?;
        Ok(lr)
    }
}

impl Drop for LrScheduler {
    fn drop(&mut self) {
        unsafe { sys::ddp_lr_scheduler_free(self.raw) }
    }
}

/// Lightning's reduce_fx of a logged value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricReduce {
    /// Weighted by batch size (the default).
    Mean,
    /// The sum.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
}

/// self.log(name, value, on_epoch=True, reduce_fx=..., sync_dist=...).
pub struct Metric(*mut sys::ddp_metric);

unsafe impl Send for Metric {}

impl Metric {
    /// A metric with Lightning's reduce_fx.
    pub fn new(reduce: MetricReduce) -> Result<Metric> {
        let mut m = ptr::null_mut();
        check(unsafe { sys::ddp_metric_new(&mut m, reduce as sys::ddp_metric_reduce) })?;
        Ok(Metric(m))
    }

    /// One batch: its value and its size (the mean's weight).
    pub fn update(&mut self, value: f64, batch_size: i64) -> Result<()> {
        check(unsafe { sys::ddp_metric_update(self.0, value, batch_size) })
    }

    /// The epoch's value: this rank's (None), or over every rank of a set-up strategy (sync_dist; collective).
    pub fn compute(&self, strategy: Option<&mut Strategy>) -> Result<f64> {
        let mut v = 0.0;
        let s = strategy.map_or(ptr::null_mut(), |s| s.0);
        check(unsafe { sys::ddp_metric_compute(self.0, s, &mut v) })?;
        Ok(v)
    }

    /// Starts a new epoch.
    pub fn reset(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_metric_reset(self.0) })
    }
}

impl Drop for Metric {
    fn drop(&mut self) {
        unsafe { sys::ddp_metric_free(self.0) }
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
        unsafe { CStr::from_ptr(sys::ddp_strategy_precision(self.0)) }.to_string_lossy().into_owned()
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
        unsafe { CStr::from_ptr(sys::ddp_group_backend(self.0)) }.to_string_lossy().into_owned()
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

/// "major.minor.patch" of the libddp actually loaded.
pub fn version_string() -> String {
    unsafe { CStr::from_ptr(sys::ddp_version_string()) }.to_string_lossy().into_owned()
}

/// The loaded libddp's version as major * 10000 + minor * 100 + patch.
pub fn version_number() -> u32 {
    unsafe { sys::ddp_version_number() }
}

/// A status code's name ("DDP_E_TIMEOUT", ...).
pub fn status_string(status: sys::ddp_status) -> String {
    unsafe { CStr::from_ptr(sys::ddp_status_string(status)) }.to_string_lossy().into_owned()
}

/// An element type's name ("float32", ...) and its size in bytes.
pub fn dtype_info(dtype: sys::ddp_dtype) -> (String, usize) {
    let name = unsafe { CStr::from_ptr(sys::ddp_dtype_name(dtype)) }.to_string_lossy().into_owned();
    (name, unsafe { sys::ddp_dtype_size(dtype) })
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
        unsafe { CStr::from_ptr(sys::ddp_strategy_precision_warning(self.0)) }.to_string_lossy().into_owned()
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
