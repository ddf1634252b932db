//! libddp from Rust: process groups, Lightning's collectives, and the DDP
//! gradient reducer with PyTorch's comm hooks, over libddp's C API.
//!
//! Handles free themselves on `Drop`; every failing call returns
//! [`Error`] with libddp's status and message. Thread safety follows the
//! header: groups, tensors and reducers may move between threads (`Send`)
//! but are not for concurrent use (not `Sync`); comm hooks may be shared.
//!
//! ```no_run
//! let group = ddp::Group::from_env()?;           // torchrun, SLURM, ddprun, ...
//! let mut x = vec![group.rank() as f32; 4];
//! group.all_reduce(&mut x, ddp::ReduceOp::Sum)?;
//! # Ok::<(), ddp::Error>(())
//! ```
#![warn(missing_docs)]
use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_int, c_void};
use std::ptr;

pub use ddp_sys as sys;

/// A failed libddp call: the status (`sys::DDP_E_*`) and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The libddp status (`sys::DDP_E_*`).
    pub status: i32,
    /// What went wrong, as libddp said it.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "libddp status {}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call of this crate.
pub type Result<T> = std::result::Result<T, Error>;

fn check(status: sys::ddp_status) -> Result<()> {
    if status == sys::DDP_OK {
        return Ok(());
    }
    // SAFETY: the message is a NUL-terminated thread-local string.
    let message = owned_str(unsafe { sys::ddp_last_error_message() });
    Err(Error { status, message })
}

/// A copy of a string libddp returned (static, or owned by a handle); "" for NULL.
fn owned_str(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: libddp returns NUL-terminated strings that live at least until the next call on the handle.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// `s` as a C string; a NUL inside is refused, naming `what`.
fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| invalid(&format!("{what} contains NUL")))
}

fn invalid(message: &str) -> Error {
    Error { status: sys::DDP_E_INVALID_ARGUMENT, message: message.to_string() }
}

/// Reduction operators (Lightning's sync_ddp: "sum", "mean", ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// The sum over the ranks.
    Sum,
    /// The sum divided by the number of ranks.
    Mean,
    /// The smallest value over the ranks.
    Min,
    /// The largest value over the ranks.
    Max,
    /// The product over the ranks.
    Product,
}

impl ReduceOp {
    fn raw(self) -> sys::ddp_reduce_op {
        match self {
            ReduceOp::Sum => sys::DDP_SUM,
            ReduceOp::Mean => sys::DDP_MEAN,
            ReduceOp::Min => sys::DDP_MIN,
            ReduceOp::Max => sys::DDP_MAX,
            ReduceOp::Product => sys::DDP_PRODUCT,
        }
    }
}

/// Element types that libddp tensors can view.
pub trait Element: Copy + Default {
    /// libddp's element type for `Self`.
    const DTYPE: sys::ddp_dtype;
}
macro_rules! element {
    ($t:ty, $d:ident) => {
        impl Element for $t {
            const DTYPE: sys::ddp_dtype = sys::$d;
        }
    };
}
element!(f32, DDP_FLOAT32);
element!(f64, DDP_FLOAT64);
element!(i8, DDP_INT8);
element!(u8, DDP_UINT8);
element!(i32, DDP_INT32);
element!(i64, DDP_INT64);

/// Whether `shape` (sizes >= 0, no overflow) holds exactly `len` elements.
fn shape_fits(shape: &[i64], len: usize) -> bool {
    shape.iter().try_fold(1i64, |n, &d| if d < 0 { None } else { n.checked_mul(d) }) == Some(len as i64)
}

// Slice views for the collectives; the public Tensor is in surface.rs.
impl Tensor {
    /// A 1-D view of `data` (the caller keeps the memory alive and unaliased).
    fn view<T: Element>(data: &mut [T]) -> Result<Tensor> {
        let n = [data.len() as i64];
        Tensor::view_shaped(data, &n)
    }

    /// A view of `data` with `shape` (whose product must be `data.len()`).
    fn view_shaped<T: Element>(data: &mut [T], shape: &[i64]) -> Result<Tensor> {
        if !shape_fits(shape, data.len()) {
            return Err(invalid("the shape does not match the data's length"));
        }
        let mut t = ptr::null_mut();
        check(unsafe {
            sys::ddp_tensor_from_blob(&mut t, data.as_mut_ptr() as *mut c_void, T::DTYPE, shape.as_ptr(), shape.len())
        })?;
        Ok(Tensor(t))
    }

    fn copy_out<T: Element>(&self) -> Result<Vec<T>> {
        if unsafe { sys::ddp_tensor_dtype(self.0) } != T::DTYPE {
            return Err(invalid("tensor dtype does not match the element type"));
        }
        let n = unsafe { sys::ddp_tensor_numel(self.0) } as usize;
        let mut v = vec![T::default(); n];
        let bytes = std::mem::size_of_val(v.as_slice());
        check(unsafe { sys::ddp_tensor_copy_to(self.0, v.as_mut_ptr() as *mut c_void, bytes) })?;
        Ok(v)
    }
}

/// A process group (on the CPU: shared memory between the ranks of a host,
/// Gloo between hosts): every rank calls the same collectives
/// in the same order.
pub struct Group(*mut sys::ddp_group);

// SAFETY: group.h: "a group may move between threads but is not for concurrent use".
unsafe impl Send for Group {}

impl Group {
    /// The group the environment describes (torchrun/ddprun, SLURM, LSF, MPI, Lightning).
    pub fn from_env() -> Result<Group> {
        let mut g = ptr::null_mut();
        check(unsafe { sys::ddp_group_init(&mut g, ptr::null(), ptr::null()) })?;
        Ok(Group(g))
    }

    /// An explicit group: `rank` of `world_size`, rank 0's store at `master_addr:master_port`.
    pub fn new(rank: i32, world_size: i32, master_addr: &str, master_port: u16) -> Result<Group> {
        let addr = CString::new(master_addr).map_err(|_| invalid("master_addr contains NUL"))?;
        let mut env = ptr::null_mut();
        check(unsafe {
            sys::ddp_env_new(&mut env, rank, world_size, rank, world_size, 0, addr.as_ptr(), c_int::from(master_port))
        })?;
        let mut g = ptr::null_mut();
        let status = unsafe { sys::ddp_group_init(&mut g, env, ptr::null()) };
        unsafe { sys::ddp_env_free(env) };
        check(status)?;
        Ok(Group(g))
    }

    /// This process's rank in the group.
    pub fn rank(&self) -> i32 {
        unsafe { sys::ddp_group_rank(self.0) }
    }

    /// The number of ranks in the group.
    pub fn size(&self) -> i32 {
        unsafe { sys::ddp_group_size(self.0) }
    }

    /// PyTorch's new_subgroups: consecutive ranks in groups of `group_size`
    /// (collective; every rank gets its own subgroup).
    pub fn new_subgroups(&self, group_size: i32) -> Result<Group> {
        let mut g = ptr::null_mut();
        check(unsafe { sys::ddp_group_new_subgroups(self.0, group_size, &mut g) })?;
        Ok(Group(g))
    }

    /// Returns once every rank of the group called it.
    pub fn barrier(&self) -> Result<()> {
        check(unsafe { sys::ddp_barrier(self.0) })
    }

    /// Lightning's sync_ddp, in place.
    pub fn all_reduce<T: Element>(&self, data: &mut [T], op: ReduceOp) -> Result<()> {
        let t = Tensor::view(data)?;
        check(unsafe { sys::ddp_all_reduce(self.0, t.0, op.raw()) })
    }

    /// `src`'s values into every rank's `data`.
    pub fn broadcast<T: Element>(&self, data: &mut [T], src: i32) -> Result<()> {
        let t = Tensor::view(data)?;
        check(unsafe { sys::ddp_broadcast(self.0, t.0, src) })
    }

    /// Lightning's gather_all_tensors: every rank's `data`, lengths may differ.
    pub fn all_gather_uneven<T: Element>(&self, data: &[T]) -> Result<Vec<Vec<T>>> {
        let mut copy = data.to_vec(); // the C API takes a mutable handle; it only reads it
        let t = Tensor::view(&mut copy)?;
        let mut parts = vec![ptr::null_mut(); self.size().max(0) as usize];
        check(unsafe { sys::ddp_all_gather_uneven(self.0, t.0, parts.as_mut_ptr()) })?;
        let owned: Vec<Tensor> = parts.into_iter().map(Tensor).collect();
        owned.iter().map(|p| p.to_vec()).collect()
    }

    /// Lightning's broadcast(obj), as bytes: `src`'s bytes on every rank.
    pub fn broadcast_bytes(&self, data: &[u8], src: i32) -> Result<Vec<u8>> {
        let mut buf = ptr::null_mut();
        check(unsafe { sys::ddp_broadcast_bytes(self.0, data.as_ptr() as *const c_void, data.len(), src, &mut buf) })?;
        let out = unsafe {
            std::slice::from_raw_parts(sys::ddp_buffer_data(buf) as *const u8, sys::ddp_buffer_size(buf)).to_vec()
        };
        unsafe { sys::ddp_buffer_free(buf) };
        Ok(out)
    }

    /// Lightning's reduce_boolean_decision: all ranks agree (`all`) or any does.
    pub fn reduce_boolean_decision(&self, decision: bool, all: bool) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::ddp_reduce_boolean_decision(self.0, c_int::from(decision), c_int::from(all), &mut out) })?;
        Ok(out != 0)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        unsafe { sys::ddp_group_free(self.0) }
    }
}

/// A communication hook (PyTorch's DDP comm hooks). `'a` is the lifetime of
/// a subgroup it uses (post-local SGD); a reducer can only take a hook whose
/// subgroup outlives it.
pub struct CommHook<'a>(*mut sys::ddp_comm_hook, std::marker::PhantomData<&'a Group>);

// SAFETY: comm_hook.h: "may be shared between threads".
unsafe impl Send for CommHook<'_> {}
unsafe impl Sync for CommHook<'_> {}

/// PyTorch's PowerSGDState arguments.
pub type PowerSgdOptions = sys::ddp_powersgd_options;

impl<'a> CommHook<'a> {
    fn own(raw: *mut sys::ddp_comm_hook) -> CommHook<'a> {
        CommHook(raw, std::marker::PhantomData)
    }
    fn make(f: unsafe extern "C" fn(*mut *mut sys::ddp_comm_hook) -> sys::ddp_status) -> Result<CommHook<'a>> {
        let mut h = ptr::null_mut();
        check(unsafe { f(&mut h) })?;
        Ok(Self::own(h))
    }
    /// PyTorch's allreduce_hook: the bucket summed, then divided by the ranks.
    pub fn allreduce() -> Result<CommHook<'a>> {
        Self::make(sys::ddp_comm_hook_allreduce)
    }
    /// PyTorch's fp16_compress_hook: reduced as float16.
    pub fn fp16_compress() -> Result<CommHook<'a>> {
        Self::make(sys::ddp_comm_hook_fp16_compress)
    }
    /// PyTorch's bf16_compress_hook: reduced as bfloat16.
    pub fn bf16_compress() -> Result<CommHook<'a>> {
        Self::make(sys::ddp_comm_hook_bf16_compress)
    }
    /// PyTorch's noop_hook: gradients left as each rank computed them.
    pub fn noop() -> Result<CommHook<'a>> {
        Self::make(sys::ddp_comm_hook_noop)
    }
    /// PyTorch's defaults (rank 1, compression from step 1000, error feedback, warm start).
    pub fn powersgd_defaults() -> PowerSgdOptions {
        let mut o = std::mem::MaybeUninit::<PowerSgdOptions>::uninit();
        // SAFETY: options_init fills the whole struct for this version.
        unsafe {
            sys::ddp_powersgd_options_init(o.as_mut_ptr(), sys::DDP_POWERSGD_OPTIONS_VERSION);
            o.assume_init()
        }
    }
    /// PyTorch's powerSGD_hook (or batched_powerSGD_hook with `options.batched`).
    pub fn powersgd(options: &PowerSgdOptions) -> Result<CommHook<'a>> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::ddp_comm_hook_powersgd(&mut h, options) })?;
        Ok(Self::own(h))
    }
    /// `inner` run on a float16 copy of each bucket.
    pub fn wrap_fp16(inner: &CommHook<'a>) -> Result<CommHook<'a>> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::ddp_comm_hook_wrap_fp16(&mut h, inner.0) })?;
        Ok(Self::own(h))
    }
    /// `inner` run on a bfloat16 copy of each bucket.
    pub fn wrap_bf16(inner: &CommHook<'a>) -> Result<CommHook<'a>> {
        let mut h = ptr::null_mut();
        check(unsafe { sys::ddp_comm_hook_wrap_bf16(&mut h, inner.0) })?;
        Ok(Self::own(h))
    }
    /// PyTorch's post_localSGD_hook: global all-reduce for `start_iter` steps,
    /// then within `subgroup` (None: one subgroup per node) or, without
    /// `post_local_gradient_allreduce`, not at all. Pair it with a [`ModelAverager`].
    pub fn post_localsgd(
        subgroup: Option<&'a Group>,
        start_iter: i64,
        post_local_gradient_allreduce: bool,
    ) -> Result<CommHook<'a>> {
        let mut h = ptr::null_mut();
        let sub = subgroup.map_or(ptr::null_mut(), |g| g.0);
        check(unsafe {
            sys::ddp_comm_hook_post_localsgd(&mut h, sub, start_iter, c_int::from(post_local_gradient_allreduce))
        })?;
        Ok(Self::own(h))
    }
    /// PowerSGD's (elements before, elements after, steps).
    pub fn compression_stats(&self) -> Result<(u64, u64, i64)> {
        let mut s = sys::ddp_compression_stats { numel_before: 0, numel_after: 0, iteration: 0 };
        check(unsafe { sys::ddp_comm_hook_compression_stats(self.0, &mut s) })?;
        Ok((s.numel_before, s.numel_after, s.iteration))
    }
}

impl Drop for CommHook<'_> {
    fn drop(&mut self) {
        unsafe { sys::ddp_comm_hook_free(self.0) }
    }
}

/// PyTorch's PeriodicModelAverager: call [`ModelAverager::step`] after each
/// optimizer step; every `period` steps from `warmup_steps` on, the
/// parameters are averaged over the group.
pub struct ModelAverager<'g> {
    raw: *mut sys::ddp_model_averager,
    _group: std::marker::PhantomData<&'g Group>,
}

// SAFETY: model_averager.h: not for concurrent use (not Sync); may move.
unsafe impl Send for ModelAverager<'_> {}

impl<'g> ModelAverager<'g> {
    /// An averager over `group`, every `period` steps from `warmup_steps` on.
    pub fn new(group: &'g Group, period: i64, warmup_steps: i64) -> Result<ModelAverager<'g>> {
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ddp_model_averager_new(&mut raw, group.0, period, warmup_steps) })?;
        Ok(ModelAverager { raw, _group: std::marker::PhantomData })
    }

    /// One optimizer step done: averages `params` in place when it is time.
    pub fn step(&mut self, params: &mut [&mut [f32]]) -> Result<()> {
        let views = params.iter_mut().map(|p| Tensor::view(p)).collect::<Result<Vec<_>>>()?;
        let handles: Vec<*mut sys::ddp_tensor> = views.iter().map(|t| t.0).collect();
        check(unsafe { sys::ddp_model_averager_step(self.raw, handles.as_ptr(), handles.len()) })
    }
}

impl Drop for ModelAverager<'_> {
    fn drop(&mut self) {
        unsafe { sys::ddp_model_averager_free(self.raw) }
    }
}

/// The DDP engine over gradient buffers it owns (one `Vec<f32>` per
/// parameter): write a gradient with [`Reducer::gradient_mut`], mark it
/// ready, and after [`Reducer::finish`] every gradient is the average over
/// the group, as PyTorch's DDP computes it.
///
/// The gradients' element type is any floating one: `f32` (the default),
/// `f64`, [`F16`] or [`BF16`].
pub struct Reducer<'g, T: Element = f32> {
    raw: *mut sys::ddp_reducer,
    grads: Vec<Vec<T>>,
    _views: Vec<Tensor>,
    _group: std::marker::PhantomData<&'g Group>,
}

// SAFETY: reducer.h: not for concurrent use (so not Sync); the buffers it
// points into are owned by the Reducer itself and move with it.
unsafe impl<T: Element> Send for Reducer<'_, T> {}

impl<'g, T: Element> Reducer<'g, T> {
    /// Buckets as PyTorch's DDP makes them (`bucket_cap_mb`, 1 MiB first bucket).
    pub fn new(group: &'g Group, grads: Vec<Vec<T>>, bucket_cap_mb: f64) -> Result<Reducer<'g, T>> {
        Reducer::with_options(group, grads, &ReducerOptions { bucket_cap_mb, ..Default::default() })
    }

    /// Gradient `index`, after [`Reducer::finish`] the average over the group.
    pub fn gradient(&self, index: usize) -> &[T] {
        &self.grads[index]
    }

    /// Write access to gradient `index` (its length is fixed).
    pub fn gradient_mut(&mut self, index: usize) -> &mut [T] {
        &mut self.grads[index]
    }

    /// Gradient `index` holds this step's value: its bucket may start reducing.
    pub fn mark_ready(&mut self, index: usize) -> Result<()> {
        check(unsafe { sys::ddp_reducer_mark_ready(self.raw, index) })
    }

    /// Waits until every bucket is reduced (unmarked gradients count as zeros with find_unused_parameters).
    pub fn finish(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_reducer_finish(self.raw) })
    }

    /// PyTorch's no_sync: `false` lets gradients accumulate locally.
    pub fn set_sync(&mut self, enabled: bool) -> Result<()> {
        check(unsafe { sys::ddp_reducer_set_sync(self.raw, c_int::from(enabled)) })
    }

    /// The reducer keeps its own reference to the hook; a subgroup the hook
    /// uses must outlive the reducer (`'h: 'g`), which the compiler checks:
    ///
    /// ```compile_fail
    /// let group = ddp::Group::from_env().unwrap();
    /// let mut reducer = ddp::Reducer::new(&group, vec![vec![0.0f32; 4]], 25.0).unwrap();
    /// {
    ///     let sub = group.new_subgroups(1).unwrap();
    ///     let hook = ddp::CommHook::post_localsgd(Some(&sub), 0, true).unwrap();
    ///     reducer.set_comm_hook(&hook).unwrap();
    /// } // `sub` is freed here, but the reducer's hook would still use it
    /// reducer.finish().unwrap();
    /// ```
    pub fn set_comm_hook<'h: 'g>(&mut self, hook: &CommHook<'h>) -> Result<()> {
        check(unsafe { sys::ddp_reducer_set_comm_hook(self.raw, hook.0) })
    }

    /// How many buckets the gradients were assigned to.
    pub fn bucket_count(&self) -> usize {
        unsafe { sys::ddp_reducer_bucket_count(self.raw) }
    }

    /// The gradient indices of bucket `bucket`, in bucket order (DDP fills buckets in reverse).
    pub fn bucket_indices(&self, bucket: usize) -> Result<Vec<usize>> {
        let mut count = 0usize;
        check(unsafe { sys::ddp_reducer_bucket_indices(self.raw, bucket, ptr::null_mut(), 0, &mut count) })?;
        let mut out = vec![0usize; count];
        check(unsafe { sys::ddp_reducer_bucket_indices(self.raw, bucket, out.as_mut_ptr(), count, &mut count) })?;
        Ok(out)
    }
}

impl<T: Element> Drop for Reducer<'_, T> {
    fn drop(&mut self) {
        unsafe { sys::ddp_reducer_free(self.raw) }
    }
}

/// A TorchScript module (written and exported in Python with
/// `torch.jit.script(...).save(path)`), trained through a [`Strategy`].
pub struct Module(*mut sys::ddp_module);

// SAFETY: model.h: "a module and its optimizer are used from one thread at a time".
unsafe impl Send for Module {}

impl Module {
    /// A module saved with `torch.jit.save`.
    pub fn load(path: &str) -> Result<Module> {
        let p = CString::new(path).map_err(|_| invalid("path contains NUL"))?;
        let mut m = ptr::null_mut();
        check(unsafe { sys::ddp_module_load(&mut m, p.as_ptr()) })?;
        Ok(Module(m))
    }

    /// How many parameter tensors the module has.
    pub fn num_parameters(&self) -> usize {
        unsafe { sys::ddp_module_num_parameters(self.0) }
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        unsafe { sys::ddp_module_free(self.0) }
    }
}

/// LibTorch objects by address, for programs whose model already lives in
/// LibTorch (tch-rs: `Tensor::as_ptr()` is the address of its `at::Tensor`).
/// libddp reads such an object as its own LibTorch lays it out, so the
/// caller's LibTorch must be libddp's: [`torch::check_version`] says so,
/// and every function here checks it first.
#[cfg(feature = "tch")]
pub mod torch {
    use super::*;
    use std::os::raw::c_char;

    /// The LibTorch version libddp was built against ("2.11.0").
    pub fn version() -> String {
        // SAFETY: a static NUL-terminated string.
        owned_str(unsafe { sys::ddp_torch_version() })
    }

    /// `Err` with `DDP_E_UNSUPPORTED`, naming both versions, unless
    /// `caller_version` ("2.11.0", "2.11.0+cpu") has libddp's major.minor.
    pub fn check_version(caller_version: &str) -> Result<()> {
        let v = CString::new(caller_version).map_err(|_| invalid("the version contains NUL"))?;
        check(unsafe { sys::ddp_torch_check_version(v.as_ptr() as *const c_char) })
    }

    /// One tensor of a model given by address: its name as a Python module
    /// names it ("net.0.weight"), whether it is a buffer (running
    /// statistics) rather than a parameter.
    pub struct Named<'a> {
        /// The dotted name ("net.0.weight").
        pub name: &'a str,
        /// The address of its `at::Tensor` (tch: `Tensor::as_ptr()`).
        pub tensor: *const c_void,
        /// A buffer (running statistics) rather than a parameter.
        pub buffer: bool,
    }

    impl Module {
        /// A model made of the caller's LibTorch tensors, shared, never
        /// copied (libddp's `ddp_module_from_tensors`): the strategy sets it
        /// up, synchronises its gradients and checkpoints it by these names,
        /// while the caller runs its forward.
        ///
        /// # Safety
        /// Each `tensor` is the address of a live `at::Tensor` of a LibTorch
        /// with `torch_version`, kept alive as long as the module.
        pub unsafe fn from_torch_tensors(torch_version: &str, tensors: &[Named<'_>]) -> Result<Module> {
            check_version(torch_version)?;
            let mut handles: Vec<Tensor> = Vec::with_capacity(tensors.len());
            let mut names = Vec::with_capacity(tensors.len());
            for t in tensors {
                if t.tensor.is_null() {
                    return Err(invalid(&format!("the tensor '{}' is a null pointer", t.name)));
                }
                let mut h = ptr::null_mut();
                check(sys::ddp_tensor_from_aten(&mut h, t.tensor))?;
                handles.push(Tensor(h));
                names.push(CString::new(t.name).map_err(|_| invalid("a name contains NUL"))?);
            }
            let name_ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
            let raw: Vec<*mut sys::ddp_tensor> = handles.iter().map(|h| h.0).collect();
            let buffers: Vec<c_int> = tensors.iter().map(|t| t.buffer as c_int).collect();
            let mut m = ptr::null_mut();
            check(sys::ddp_module_from_tensors(&mut m, name_ptrs.as_ptr(), raw.as_ptr(), buffers.as_ptr(), raw.len()))?;
            Ok(Module(m))
        }

        /// The raw handle, for the C API's calls this crate does not wrap yet.
        pub fn as_raw(&self) -> *mut sys::ddp_module {
            self.0
        }
    }

    impl Tensor {
        /// A handle to the caller's LibTorch tensor (same storage and
        /// autograd identity): libddp's operators, losses and collectives
        /// then work on it.
        ///
        /// # Safety
        /// `aten` is the address of a live `at::Tensor` (tch: `Tensor::as_ptr()`)
        /// of a LibTorch with `torch_version`.
        pub unsafe fn from_aten(torch_version: &str, aten: *const c_void) -> Result<Tensor> {
            check_version(torch_version)?;
            crate::tensor::new_tensor(|out| sys::ddp_tensor_from_aten(out, aten))
        }

        /// Hands this tensor (same storage and autograd identity, e.g. a
        /// SyncBatchNorm output with its gradient path) back to the caller's
        /// LibTorch by assigning it to the `at::Tensor` at `aten_out`.
        ///
        /// # Safety
        /// `aten_out` is the address of a live `at::Tensor` (tch:
        /// `Tensor::as_mut_ptr()`) of a LibTorch with `torch_version`; it is overwritten.
        pub unsafe fn to_aten(&self, torch_version: &str, aten_out: *mut c_void) -> Result<()> {
            check_version(torch_version)?;
            check(sys::ddp_tensor_to_aten(self.0, aten_out))
        }
    }

    impl Optimizer {
        /// The caller's own `torch::optim::Optimizer`, shared: the strategy
        /// steps and checkpoints it (the handle never frees it).
        ///
        /// # Safety
        /// `optimizer` is the address of a live `torch::optim::Optimizer`
        /// (the base class) of a LibTorch with `torch_version`, outliving the handle.
        pub unsafe fn from_torch(torch_version: &str, optimizer: *mut c_void) -> Result<Optimizer> {
            check_version(torch_version)?;
            let mut o = ptr::null_mut();
            check(sys::ddp_optimizer_from_torch(&mut o, optimizer))?;
            Ok(Optimizer(o))
        }
    }
}

/// LibTorch's SGD over a module's parameters; make it after
/// [`Strategy::setup_module`].
pub struct Optimizer(*mut sys::ddp_optimizer);

unsafe impl Send for Optimizer {}

impl Optimizer {
    /// torch.optim.SGD(lr, momentum) over the module's parameters.
    pub fn sgd(module: &mut Module, lr: f64, momentum: f64) -> Result<Optimizer> {
        let mut o = sys::ddp_sgd_options {
            version: sys::DDP_SGD_OPTIONS_VERSION,
            lr,
            momentum,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: 0,
        };
        let mut opt = ptr::null_mut();
        check(unsafe { sys::ddp_optimizer_new_sgd(&mut opt, module.0, &mut o) })?;
        Ok(Optimizer(opt))
    }
}

impl Drop for Optimizer {
    fn drop(&mut self) {
        unsafe { sys::ddp_optimizer_free(self.0) }
    }
}

/// Lightning's DDPStrategy on the CPU: the ranks come from a launcher's
/// environment (ddprun, torchrun, SLURM, ...), or, with `devices` > 1 and
/// none, this process starts the others by running the program again.
// The second field keeps the checkpoint IO and cluster environment objects
// the C strategy calls until it is freed (Drop frees the strategy first).
pub struct Strategy(*mut sys::ddp_strategy, #[allow(dead_code)] callbacks::Callbacks);

unsafe impl Send for Strategy {}

impl Strategy {
    /// A strategy with Lightning's defaults and `devices` processes on this node (0: auto, the launcher's count).
    pub fn new(devices: i32) -> Result<Strategy> {
        let mut o = std::mem::MaybeUninit::<sys::ddp_strategy_options>::uninit();
        check(unsafe { sys::ddp_strategy_options_init(o.as_mut_ptr(), sys::DDP_STRATEGY_OPTIONS_VERSION) })?;
        let mut o = unsafe { o.assume_init() };
        o.devices = devices;
        let mut s = ptr::null_mut();
        check(unsafe { sys::ddp_strategy_new(&mut s, &o) })?;
        Ok(Strategy(s, Default::default()))
    }

    /// Reads the environment (or starts the other ranks) and joins the group.
    pub fn setup_environment(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_strategy_setup_environment(self.0) })
    }

    /// This process's rank in the job.
    pub fn global_rank(&self) -> i32 {
        unsafe { sys::ddp_strategy_global_rank(self.0) }
    }

    /// The number of processes in the job.
    pub fn world_size(&self) -> i32 {
        unsafe { sys::ddp_strategy_world_size(self.0) }
    }

    /// Whether this is global rank 0 (the one that writes checkpoints).
    pub fn is_global_zero(&self) -> bool {
        unsafe { sys::ddp_strategy_is_global_zero(self.0) != 0 }
    }

    /// Rank 0's weights on every rank, and the module wrapped with DDP.
    pub fn setup_module(&mut self, module: &mut Module) -> Result<()> {
        check(unsafe { sys::ddp_strategy_setup_module(self.0, module.0) })
    }

    /// One training step on a batch: forward of `x` (`rows` x `x.len() / rows`),
    /// cross-entropy against the class indices `y`, zero_grad, backward (the
    /// gradients averaged over the ranks) and the optimizer's step. Returns
    /// this rank's loss.
    pub fn train_step(
        &mut self,
        module: &mut Module,
        optimizer: &mut Optimizer,
        x: &mut [f32],
        y: &mut [i64],
    ) -> Result<f32> {
        let (loss, _logits) = self.step_tensors(module, optimizer, x, y)?;
        Ok(loss.to_vec::<f32>()?[0])
    }

    /// The step of [`Strategy::train_step`], handing back the loss and the logits.
    fn step_tensors(
        &mut self,
        module: &mut Module,
        optimizer: &mut Optimizer,
        x: &mut [f32],
        y: &mut [i64],
    ) -> Result<(Tensor, Tensor)> {
        let rows = y.len();
        if rows == 0 || x.len() % rows != 0 {
            return Err(invalid("x must hold the same number of features for each of y's rows"));
        }
        let cols = (x.len() / rows) as i64;
        let xt = Tensor::view_shaped(x, &[rows as i64, cols])?;
        let yt = Tensor::view(y)?;
        let mut logits = ptr::null_mut();
        check(unsafe { sys::ddp_strategy_forward(self.0, module.0, xt.0, &mut logits) })?;
        let logits = Tensor(logits);
        let mut loss = ptr::null_mut();
        check(unsafe { sys::ddp_loss_cross_entropy(logits.0, yt.0, &mut loss) })?;
        let loss = Tensor(loss);
        check(unsafe { sys::ddp_optimizer_zero_grad(optimizer.0) })?;
        check(unsafe { sys::ddp_strategy_backward(self.0, loss.0) })?;
        check(unsafe { sys::ddp_strategy_optimizer_step(self.0, optimizer.0) })?;
        Ok((loss, logits))
    }

    /// Lightning's reduce, in place over the ranks.
    pub fn reduce<T: Element>(&mut self, data: &mut [T], op: ReduceOp) -> Result<()> {
        let t = Tensor::view(data)?;
        check(unsafe { sys::ddp_strategy_reduce(self.0, t.0, op.raw()) })
    }

    /// Lightning's barrier: returns once every rank called it; `name` shows in a timeout's message.
    pub fn barrier(&mut self, name: &str) -> Result<()> {
        let n = CString::new(name).map_err(|_| invalid("name contains NUL"))?;
        check(unsafe { sys::ddp_strategy_barrier(self.0, n.as_ptr()) })
    }

    /// Global rank 0 writes the checkpoint atomically; collective.
    pub fn save_checkpoint(&mut self, path: &str, module: &Module, optimizer: &Optimizer, step: i64, epoch: i64) -> Result<()> {
        let p = CString::new(path).map_err(|_| invalid("path contains NUL"))?;
        check(unsafe {
            sys::ddp_strategy_save_checkpoint(self.0, p.as_ptr(), module.0, optimizer.0, step, epoch, ptr::null(), 0)
        })
    }

    /// Every rank reads the checkpoint into `module` and `optimizer`; returns (step, epoch).
    pub fn load_checkpoint(&mut self, path: &str, module: &mut Module, optimizer: &mut Optimizer) -> Result<(i64, i64)> {
        let p = CString::new(path).map_err(|_| invalid("path contains NUL"))?;
        let (mut step, mut epoch) = (0i64, 0i64);
        check(unsafe {
            sys::ddp_strategy_load_checkpoint(self.0, p.as_ptr(), module.0, optimizer.0, &mut step, &mut epoch, ptr::null_mut())
        })?;
        Ok((step, epoch))
    }

    /// Undoes setup; waits for the ranks this process started.
    pub fn teardown(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_strategy_teardown(self.0) })
    }
}

impl Drop for Strategy {
    fn drop(&mut self) {
        unsafe { sys::ddp_strategy_free(self.0) }
    }
}

mod training;
pub use training::{sampler_indices, sampler_num_samples, CheckpointInfo, ClipAlgorithm, SamplerOptions, StrategyKind, StrategyOptions};

mod extensions;
mod callbacks;
mod optim;
mod surface;
mod tensor;
pub use optim::{
    LrScheduler, LrSchedulerOptions, Metric, MetricReduce, OptimizerKind, ParamGroup, DDP_LR_COSINE_ANNEALING,
    DDP_LR_EXPONENTIAL, DDP_LR_LINEAR, DDP_LR_MULTI_STEP, DDP_LR_ONE_CYCLE, DDP_LR_REDUCE_ON_PLATEAU, DDP_LR_STEP,
};
pub use callbacks::{CheckpointIo, ClusterEnvironment};
pub use surface::Outputs;
pub use tensor::{
    dtype_info, is_deterministic, is_grad_enabled, reset_seed, seed_everything, set_deterministic, set_grad_enabled,
    status_string, version_number, version_string, BinaryOp, LossKind, LossOptions, Reduction, Tensor, UnaryOp,
};
pub use extensions::{spawn, Bucket, Env, ReducerOptions, StartMethod, View, Work, Worker, WorkerFn, BF16, F16};
