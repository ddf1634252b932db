//! Training state around the model: torch.optim's optimizers over
//! parameter groups ([`ParamGroup`], [`OptimizerKind`]), the learning-rate
//! schedulers ([`LrScheduler`], SequentialLR) and Lightning's logged
//! [`Metric`]. Each function is one C API call.
use super::*;
use std::os::raw::c_char;

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
    pub(crate) raw: *mut sys::ddp_lr_scheduler,
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
    /// The options of `kind` with torch's defaults, as libddp's
    /// ddp_lr_scheduler_options_init gives them. Panics on a kind libddp does not know.
    pub fn defaults(kind: sys::ddp_lr_scheduler_kind) -> LrSchedulerOptions {
        let mut o = std::mem::MaybeUninit::<LrSchedulerOptions>::uninit();
        // SAFETY: on DDP_OK, ddp_lr_scheduler_options_init has filled every field of this version.
        let status =
            unsafe { sys::ddp_lr_scheduler_options_init(o.as_mut_ptr(), sys::DDP_LR_SCHEDULER_OPTIONS_VERSION, kind) };
        assert_eq!(status, sys::DDP_OK, "ddp_lr_scheduler_options_init: {}", owned_str(unsafe { sys::ddp_last_error_message() }));
        unsafe { o.assume_init() }
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
