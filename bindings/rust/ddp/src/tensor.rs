//! Tensors as Rust values: arithmetic with autograd ([`Tensor`] and its
//! operators), the grad mode, seeding and determinism, every loss
//! ([`LossOptions`]), and the library's version and names. Each function is
//! one C API call; libddp (ATen) computes every value.
use super::*;
use std::ops;


pub(crate) fn new_tensor(f: impl FnOnce(*mut *mut sys::ddp_tensor) -> sys::ddp_status) -> Result<Tensor> {
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
    /// `kind` with torch's defaults, as libddp's ddp_loss_options_init gives them.
    pub fn new(kind: LossKind) -> LossOptions<'t> {
        let mut o = std::mem::MaybeUninit::<sys::ddp_loss_options>::uninit();
        // SAFETY: ddp_loss_options_init fills every field of this version; the kind is one of LossKind's.
        let status = unsafe {
            sys::ddp_loss_options_init(o.as_mut_ptr(), sys::DDP_LOSS_OPTIONS_VERSION, kind as sys::ddp_loss_kind)
        };
        assert_eq!(status, sys::DDP_OK, "ddp_loss_options_init refused its own version");
        let o = unsafe { o.assume_init() };
        let reduction = match o.reduction {
            sys::DDP_REDUCTION_SUM => Reduction::Sum,
            sys::DDP_REDUCTION_NONE => Reduction::None,
            sys::DDP_REDUCTION_BATCHMEAN => Reduction::BatchMean,
            _ => Reduction::Mean,
        };
        LossOptions {
            kind,
            reduction,
            weight: None,
            ignore_index: o.ignore_index,
            label_smoothing: o.label_smoothing,
            pos_weight: None,
            beta: o.beta,
            delta: o.delta,
            log_target: o.log_target != 0,
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

/// "major.minor.patch" of the libddp actually loaded.
pub fn version_string() -> String {
    owned_str(unsafe { sys::ddp_version_string() })
}

/// The loaded libddp's version as major * 10000 + minor * 100 + patch.
pub fn version_number() -> u32 {
    unsafe { sys::ddp_version_number() }
}

/// A status code's name ("DDP_E_TIMEOUT", ...).
pub fn status_string(status: sys::ddp_status) -> String {
    owned_str(unsafe { sys::ddp_status_string(status) })
}

/// An element type's name ("float32", ...) and its size in bytes.
pub fn dtype_info(dtype: sys::ddp_dtype) -> (String, usize) {
    let name = owned_str(unsafe { sys::ddp_dtype_name(dtype) });
    (name, unsafe { sys::ddp_dtype_size(dtype) })
}
