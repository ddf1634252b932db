//! Comm hooks written in Rust, spawn from Rust, and the half-precision
//! element types. Each forwards to one C API call; the closures and
//! functions are the caller's.
use super::*;
use std::mem::ManuallyDrop;
use std::sync::Mutex;

/// IEEE binary16 by its bits (what the `half` crate's `f16::to_bits` gives):
/// a gradient element type of the reducer and the collectives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

/// bfloat16 by its bits (the upper half of an f32's: `(x.to_bits() >> 16) as u16` truncates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct BF16(pub u16);

element!(F16, DDP_FLOAT16);
element!(BF16, DDP_BFLOAT16);

/// One ready bucket as a Rust comm hook sees it (valid during the call only).
pub struct Bucket<'a> {
    raw: &'a sys::ddp_comm_bucket,
}

impl Bucket<'_> {
    /// The bucket's position in the step (buckets run in index order).
    pub fn index(&self) -> usize {
        self.raw.index
    }
    /// Whether this is the step's last bucket.
    pub fn is_last(&self) -> bool {
        self.raw.is_last != 0
    }
    /// Divide by this to average (the group's size, or the ranks not joined).
    pub fn divisor(&self) -> i32 {
        self.raw.divisor
    }
    /// (parameter index, element offset in the buffer, shape) of each gradient in it.
    pub fn params(&self) -> Vec<(usize, i64, Vec<i64>)> {
        (0..self.raw.num_params)
            .map(|k| unsafe {
                let ndim = *self.raw.ndims.add(k);
                let shape = std::slice::from_raw_parts(*self.raw.shapes.add(k), ndim).to_vec();
                (*self.raw.param_indices.add(k), *self.raw.offsets.add(k), shape)
            })
            .collect()
    }
    /// The flat bucket, to reduce in place; `Err` unless its elements are `T` in host memory.
    pub fn buffer_mut<T: Element>(&mut self) -> Result<&mut [T]> {
        let t = self.raw.buffer;
        unsafe {
            if sys::ddp_tensor_dtype(t) != T::DTYPE || sys::ddp_tensor_device(t).type_ != sys::DDP_DEVICE_CPU {
                return Err(invalid("the bucket is not of this element type in host memory"));
            }
            let n = sys::ddp_tensor_numel(t) as usize;
            let data = sys::ddp_tensor_data(t) as *mut T;
            Ok(if n == 0 { &mut [] } else { std::slice::from_raw_parts_mut(data, n) })
        }
    }
}

unsafe extern "C" fn hook_trampoline<F>(
    group: *mut sys::ddp_group,
    bucket: *const sys::ddp_comm_bucket,
    user: *mut c_void,
) -> sys::ddp_status
where
    F: Fn(&Group, &mut Bucket<'_>) -> Result<()> + Send + Sync + 'static,
{
    // The group is borrowed from libddp for the call: never freed here.
    let group = ManuallyDrop::new(Group(group));
    let mut bucket = Bucket { raw: &*bucket };
    let f = &*(user as *const F);
    // A panic must not unwind into C: it fails the step as an internal error.
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&group, &mut bucket))) {
        Ok(Ok(())) => sys::DDP_OK,
        Ok(Err(e)) => {
            set_reason(&e.message);
            if e.status == sys::DDP_OK { sys::DDP_E_INTERNAL } else { e.status }
        }
        Err(_) => {
            set_reason("the Rust comm hook panicked");
            sys::DDP_E_INTERNAL
        }
    }
}

fn set_reason(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    unsafe { sys::ddp_error_set(c.as_ptr()) }
}

impl CommHook<'static> {
    /// A comm hook written in Rust: `f(group, bucket)` runs for each ready
    /// bucket, on the thread that completed it, and leaves the reduced
    /// bucket in `bucket.buffer_mut()` (e.g. `group.all_reduce` on it, then a
    /// division by `bucket.divisor()`). An `Err` (its status and message) or
    /// a panic fails the step on every rank. The closure lives as long as
    /// the process: reducers and strategies may hold the hook after this
    /// value is dropped.
    pub fn custom<F>(f: F) -> Result<CommHook<'static>>
    where
        F: Fn(&Group, &mut Bucket<'_>) -> Result<()> + Send + Sync + 'static,
    {
        let user = Box::into_raw(Box::new(f));
        let mut h = ptr::null_mut();
        let status = unsafe { sys::ddp_comm_hook_custom(&mut h, Some(hook_trampoline::<F>), user as *mut c_void) };
        if status != sys::DDP_OK {
            drop(unsafe { Box::from_raw(user) }); // never registered: freed
        }
        check(status)?;
        Ok(CommHook::own(h))
    }
}

/// One worker of [`spawn`]: its place in the job.
pub struct Worker(*mut sys::ddp_worker);

impl Worker {
    /// This worker's rank in the job.
    pub fn rank(&self) -> i32 {
        unsafe { sys::ddp_worker_rank(self.0) }
    }
    /// The number of workers.
    pub fn world_size(&self) -> i32 {
        unsafe { sys::ddp_worker_world_size(self.0) }
    }
    /// This worker's rank on its node.
    pub fn local_rank(&self) -> i32 {
        unsafe { sys::ddp_worker_local_rank(self.0) }
    }
    /// On rank 0: what [`spawn`] returns to the launching program.
    pub fn set_result(&self, bytes: &[u8]) -> Result<()> {
        check(unsafe { sys::ddp_worker_set_result(self.0, bytes.as_ptr() as *const c_void, bytes.len()) })
    }
}

/// The function every worker runs: `(worker, the bytes given to spawn)` to an exit code.
pub type WorkerFn = fn(&Worker, &[u8]) -> i32;

static WORKER_FN: Mutex<Option<WorkerFn>> = Mutex::new(None);

unsafe extern "C" fn worker_trampoline(worker: *mut sys::ddp_worker, arg: *const c_void, len: usize) -> c_int {
    let f = match *WORKER_FN.lock().unwrap_or_else(|e| e.into_inner()) {
        Some(f) => f,
        None => return 1,
    };
    let bytes = if len == 0 { &[][..] } else { std::slice::from_raw_parts(arg as *const u8, len) };
    let w = Worker(worker);
    std::panic::catch_unwind(|| f(&w, bytes)).unwrap_or(1)
}

/// How [`spawn`] starts its workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartMethod {
    /// Runs this program again (DDPSpawnStrategy's spawn); it reaches this
    /// same `spawn` call, which then runs `f` as a worker.
    Popen,
    /// fork(): the workers are copies of this process.
    Fork,
}

/// Lightning's DDPSpawnStrategy launcher: `nprocs` workers each run `f`
/// (a plain function: a worker may be this program started again) with
/// `arg`; returns rank 0's [`Worker::set_result`] bytes. A failing or
/// stopped worker stops the others and is named in the error.
pub fn spawn(nprocs: i32, start: StartMethod, timeout_ms: i64, f: WorkerFn, arg: &[u8]) -> Result<Vec<u8>> {
    *WORKER_FN.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    let mut o = std::mem::MaybeUninit::<sys::ddp_spawn_options>::uninit();
    check(unsafe { sys::ddp_spawn_options_init(o.as_mut_ptr(), sys::DDP_SPAWN_OPTIONS_VERSION) })?;
    let mut o = unsafe { o.assume_init() };
    o.nprocs = nprocs;
    o.start_method = match start {
        StartMethod::Popen => sys::DDP_START_POPEN,
        StartMethod::Fork => sys::DDP_START_FORK,
    };
    o.timeout_ms = timeout_ms;
    let mut result = ptr::null_mut();
    check(unsafe {
        sys::ddp_spawn(&o, Some(worker_trampoline), arg.as_ptr() as *const c_void, arg.len(), &mut result)
    })?;
    Ok(take_buffer(result))
}

/// The bytes of a libddp buffer handed out to the caller (freed here); NULL is no bytes.
pub(crate) fn take_buffer(buf: *mut sys::ddp_buffer) -> Vec<u8> {
    if buf.is_null() {
        return Vec::new();
    }
    let out = unsafe {
        let n = sys::ddp_buffer_size(buf);
        let data = sys::ddp_buffer_data(buf) as *const u8;
        if n == 0 { Vec::new() } else { std::slice::from_raw_parts(data, n).to_vec() }
    };
    unsafe { sys::ddp_buffer_free(buf) };
    out
}

/// One process's place in a job, as a launcher or cluster gives it
/// (TorchElastic > SLURM > LSF > MPI > Lightning's variables).
pub struct Env(*mut sys::ddp_env);

impl Env {
    /// The environment this process runs in.
    pub fn detect() -> Result<Env> {
        let mut e = ptr::null_mut();
        check(unsafe { sys::ddp_env_detect(&mut e) })?;
        Ok(Env(e))
    }
    /// The named environment ("torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow").
    pub fn from_name(name: &str) -> Result<Env> {
        let n = cstring(name, "name")?;
        let mut e = ptr::null_mut();
        check(unsafe { sys::ddp_env_from_name(&mut e, n.as_ptr()) })?;
        Ok(Env(e))
    }
    /// The environment of "NAME=value" strings instead of the process's (name None: detected).
    pub fn from_vars(vars: &[&str], name: Option<&str>) -> Result<Env> {
        let owned = vars.iter().map(|v| cstring(v, "a variable")).collect::<Result<Vec<_>>>()?;
        let mut ptrs: Vec<*const std::os::raw::c_char> = owned.iter().map(|v| v.as_ptr()).collect();
        ptrs.push(ptr::null());
        let n = name.map(|n| cstring(n, "name")).transpose()?;
        let mut e = ptr::null_mut();
        check(unsafe { sys::ddp_env_from_vars(&mut e, ptrs.as_ptr(), n.as_ref().map_or(ptr::null(), |n| n.as_ptr())) })?;
        Ok(Env(e))
    }
    /// "torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow" or "explicit".
    pub fn name(&self) -> String {
        owned_str(unsafe { sys::ddp_env_name(self.0) })
    }
    /// This process's rank in the job.
    pub fn rank(&self) -> i32 {
        unsafe { sys::ddp_env_rank(self.0) }
    }
    /// The number of processes in the job.
    pub fn world_size(&self) -> i32 {
        unsafe { sys::ddp_env_world_size(self.0) }
    }
    /// This process's rank on its node.
    pub fn local_rank(&self) -> i32 {
        unsafe { sys::ddp_env_local_rank(self.0) }
    }
    /// The number of processes on this node.
    pub fn local_world_size(&self) -> i32 {
        unsafe { sys::ddp_env_local_world_size(self.0) }
    }
    /// This node's index.
    pub fn node_rank(&self) -> i32 {
        unsafe { sys::ddp_env_node_rank(self.0) }
    }
    /// The rendezvous store's host (MASTER_ADDR).
    pub fn master_addr(&self) -> String {
        owned_str(unsafe { sys::ddp_env_master_addr(self.0) })
    }
    /// The rendezvous store's port (MASTER_PORT).
    pub fn master_port(&self) -> i32 {
        unsafe { sys::ddp_env_master_port(self.0) }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        unsafe { sys::ddp_env_free(self.0) }
    }
}

/// A collective in flight over the caller's slice, which stays borrowed
/// until the work is waited on or dropped (dropping waits first, with the
/// group's timeout, so the memory is never released under it).
pub struct Work<'a> {
    raw: *mut sys::ddp_work,
    _view: Option<Tensor>,
    waited: bool,
    _data: std::marker::PhantomData<&'a mut [u8]>,
}

impl Work<'_> {
    /// Waits for the collective: `timeout_ms` < 0 is the group's timeout.
    /// Running out of time is `DDP_E_TIMEOUT` and leaves the group broken.
    pub fn wait(&mut self, timeout_ms: i64) -> Result<()> {
        self.waited = true;
        check(unsafe { sys::ddp_work_wait(self.raw, timeout_ms) })
    }
    /// Whether the collective has finished (a wait would not block).
    pub fn is_completed(&self) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::ddp_work_is_completed(self.raw, &mut out) })?;
        Ok(out != 0)
    }
    /// The number of result tensors of a waited all_gather (1) or all_gather_uneven (one per rank).
    pub fn result_count(&self) -> usize {
        unsafe { sys::ddp_work_result_count(self.raw) }
    }
    /// Result tensor `index` of a waited work (`DDP_E_STATE` before the wait).
    pub fn result_tensor(&self, index: usize) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe { sys::ddp_work_result_tensor(self.raw, index, &mut t) })?;
        Ok(Tensor(t))
    }
    /// The bytes of a waited [`Group::broadcast_bytes_async`].
    pub fn result_bytes(&self) -> Result<Vec<u8>> {
        let mut b = ptr::null_mut();
        check(unsafe { sys::ddp_work_result_buffer(self.raw, &mut b) })?;
        Ok(take_buffer(b))
    }
    /// The decision of a waited [`Group::reduce_boolean_decision_async`].
    pub fn result_decision(&self) -> Result<bool> {
        let mut out: c_int = 0;
        check(unsafe { sys::ddp_work_result_decision(self.raw, &mut out) })?;
        Ok(out != 0)
    }
}

fn started<'a>(view: Option<Tensor>, f: impl FnOnce(*mut *mut sys::ddp_work) -> sys::ddp_status) -> Result<Work<'a>> {
    let mut w = ptr::null_mut();
    check(f(&mut w))?;
    Ok(Work { raw: w, _view: view, waited: false, _data: std::marker::PhantomData })
}

impl Drop for Work<'_> {
    fn drop(&mut self) {
        if !self.waited {
            unsafe { sys::ddp_work_wait(self.raw, -1) };
        }
        unsafe { sys::ddp_work_free(self.raw) }
    }
}

impl Group {
    /// A group over an explicit or detected [`Env`].
    pub fn with_env(env: &Env) -> Result<Group> {
        let mut g = ptr::null_mut();
        check(unsafe { sys::ddp_group_init(&mut g, env.0, ptr::null()) })?;
        Ok(Group(g))
    }

    /// [`Group::all_reduce`] without waiting: the returned [`Work`] holds `data` until waited on.
    pub fn all_reduce_async<'a, T: Element>(&self, data: &'a mut [T], op: ReduceOp) -> Result<Work<'a>> {
        let view = Tensor::view(data)?;
        let v = view.0;
        started(Some(view), |w| unsafe { sys::ddp_all_reduce_async(self.0, v, op.raw(), w) })
    }

    /// [`Group::broadcast`] without waiting.
    pub fn broadcast_async<'a, T: Element>(&self, data: &'a mut [T], src: i32) -> Result<Work<'a>> {
        let view = Tensor::view(data)?;
        let v = view.0;
        started(Some(view), |w| unsafe { sys::ddp_broadcast_async(self.0, v, src, w) })
    }

    /// [`Group::reduce`] without waiting.
    pub fn reduce_async<'a, T: Element>(&self, data: &'a mut [T], dst: i32, op: ReduceOp) -> Result<Work<'a>> {
        let view = Tensor::view(data)?;
        let v = view.0;
        started(Some(view), |w| unsafe { sys::ddp_reduce_async(self.0, v, dst, op.raw(), w) })
    }

    /// [`Group::all_gather`] without waiting: [`Work::result_tensor`]`(0)` after the wait.
    pub fn all_gather_async<'a, T: Element>(&self, data: &'a mut [T]) -> Result<Work<'a>> {
        let view = Tensor::view(data)?;
        let v = view.0;
        started(Some(view), |w| unsafe { sys::ddp_all_gather_async(self.0, v, w) })
    }

    /// [`Group::all_gather_into`] without waiting: `out` is written until the wait.
    pub fn all_gather_into_async<'a, T: Element>(&self, data: &'a mut [T], out: &'a mut [T]) -> Result<Work<'a>> {
        let input = Tensor::view(data)?;
        let view = Tensor::view(out)?;
        let (i, v) = (input.0, view.0);
        // The work holds both tensors on the C side; `view` keeps the handle of the one it writes.
        started(Some(view), |w| unsafe { sys::ddp_all_gather_into_tensor_async(self.0, i, v, w) })
    }

    /// [`Group::all_gather_uneven`] without waiting: [`Work::result_tensor`]`(rank)` after the wait.
    pub fn all_gather_uneven_async<'a, T: Element>(&self, data: &'a mut [T]) -> Result<Work<'a>> {
        let view = Tensor::view(data)?;
        let v = view.0;
        started(Some(view), |w| unsafe { sys::ddp_all_gather_uneven_async(self.0, v, w) })
    }

    /// [`Group::barrier`] without waiting.
    pub fn barrier_async(&self) -> Result<Work<'static>> {
        started(None, |w| unsafe { sys::ddp_barrier_async(self.0, w) })
    }

    /// [`Group::broadcast_bytes`] without waiting (`data` is copied): [`Work::result_bytes`].
    pub fn broadcast_bytes_async(&self, data: &[u8], src: i32) -> Result<Work<'static>> {
        started(None, |w| unsafe {
            sys::ddp_broadcast_bytes_async(self.0, data.as_ptr() as *const c_void, data.len(), src, w)
        })
    }

    /// [`Group::reduce_boolean_decision`] without waiting: [`Work::result_decision`].
    pub fn reduce_boolean_decision_async(&self, decision: bool, all: bool) -> Result<Work<'static>> {
        started(None, |w| unsafe { sys::ddp_reduce_boolean_decision_async(self.0, decision as c_int, all as c_int, w) })
    }
}

/// A libddp tensor over the caller's slice, made once for many collectives
/// (the slice forms of [`Group::all_reduce`] wrap the slice on every call).
/// The slice stays borrowed while the view lives; read it through [`View::as_slice`].
pub struct View<'a, T: Element> {
    tensor: Tensor,
    len: usize,
    _data: std::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> View<'a, T> {
    /// A view of `data`, borrowed as long as the view lives.
    pub fn new(data: &'a mut [T]) -> Result<View<'a, T>> {
        let len = data.len();
        Ok(View { tensor: Tensor::view(data)?, len, _data: std::marker::PhantomData })
    }
    /// The slice's current values.
    pub fn as_slice(&self) -> &[T] {
        let p = unsafe { sys::ddp_tensor_data(self.tensor.0) } as *const T;
        if self.len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(p, self.len) } }
    }
}

impl Group {
    /// [`Group::all_reduce`] on a [`View`] made once.
    pub fn all_reduce_view<T: Element>(&self, view: &mut View<'_, T>, op: ReduceOp) -> Result<()> {
        check(unsafe { sys::ddp_all_reduce(self.0, view.tensor.0, op.raw()) })
    }
    /// [`Group::broadcast`] on a [`View`] made once.
    pub fn broadcast_view<T: Element>(&self, view: &mut View<'_, T>, src: i32) -> Result<()> {
        check(unsafe { sys::ddp_broadcast(self.0, view.tensor.0, src) })
    }
}

/// `ddp_reducer_options` with DDP's defaults (`ReducerOptions::default()`);
/// its broadcast_parameters is not here: this reducer is over gradient
/// buffers, with no parameters to broadcast.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReducerOptions {
    /// DDP's bucket size cap (25).
    pub bucket_cap_mb: f64,
    /// The first bucket's size (1).
    pub first_bucket_mb: f64,
    /// Gradients not marked ready in a step count as zeros.
    pub find_unused_parameters: bool,
    /// PyTorch's Join: a rank out of batches calls [`Reducer::join`].
    pub join_enabled: bool,
}

impl Default for ReducerOptions {
    fn default() -> Self {
        let o = raw_reducer_defaults();
        ReducerOptions {
            bucket_cap_mb: o.bucket_cap_mb,
            first_bucket_mb: o.first_bucket_mb,
            find_unused_parameters: o.find_unused_parameters != 0,
            join_enabled: o.join_enabled != 0,
        }
    }
}

fn raw_reducer_defaults() -> sys::ddp_reducer_options {
    let mut o = std::mem::MaybeUninit::<sys::ddp_reducer_options>::uninit();
    // SAFETY: ddp_reducer_options_init fills every field of this version.
    let status = unsafe { sys::ddp_reducer_options_init(o.as_mut_ptr(), sys::DDP_REDUCER_OPTIONS_VERSION) };
    assert_eq!(status, sys::DDP_OK, "ddp_reducer_options_init refused its own version");
    unsafe { o.assume_init() }
}

impl<'g, T: Element> Reducer<'g, T> {
    /// A reducer with every option of [`ReducerOptions`].
    pub fn with_options(group: &'g Group, mut grads: Vec<Vec<T>>, options: &ReducerOptions) -> Result<Reducer<'g, T>> {
        let mut views = Vec::with_capacity(grads.len());
        for g in grads.iter_mut() {
            views.push(Tensor::view(g.as_mut_slice())?);
        }
        let handles: Vec<*mut sys::ddp_tensor> = views.iter().map(|t| t.0).collect();
        let mut o = raw_reducer_defaults();
        o.bucket_cap_mb = options.bucket_cap_mb;
        o.first_bucket_mb = options.first_bucket_mb;
        o.find_unused_parameters = options.find_unused_parameters as c_int;
        o.broadcast_parameters = 0; // over gradient buffers: no parameters to broadcast
        o.join_enabled = options.join_enabled as c_int;
        let mut raw = ptr::null_mut();
        check(unsafe { sys::ddp_reducer_new(&mut raw, group.0, ptr::null(), handles.as_ptr(), handles.len(), &o) })?;
        Ok(Reducer { raw, grads, _views: views, _group: std::marker::PhantomData })
    }

    /// PyTorch's Join: this rank is out of batches (with `join_enabled`).
    pub fn join(&mut self) -> Result<()> {
        check(unsafe { sys::ddp_reducer_join(self.raw) })
    }
}
