//! Raw declarations of libddp's C API (capi/include/ddp/*.h): every
//! function, struct, enum and constant, as the header declares them.
//! `check_sys.py` (run by the test suite) compares this file with Debian's
//! bindgen output for the header, so the two cannot drift apart.
//!
//! Ownership and errors follow the C API: a function returning `ddp_status`
//! gives `DDP_OK` (0) or a negative status and sets a thread-local message
//! (`ddp_last_error_message`); `*_free` releases what `**out` handed out.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]

use std::os::raw::{c_char, c_int, c_uint, c_void};

pub const DDP_VERSION_MAJOR: u32 = 0;
pub const DDP_VERSION_MINOR: u32 = 1;
pub const DDP_VERSION_PATCH: u32 = 0;
pub const DDP_VERSION_NUMBER: u32 = 100;
pub const DDP_GROUP_OPTIONS_VERSION: u32 = 1;
pub const DDP_SPAWN_OPTIONS_VERSION: u32 = 1;
pub const DDP_POWERSGD_OPTIONS_VERSION: u32 = 1;
pub const DDP_REDUCER_OPTIONS_VERSION: u32 = 2;
pub const DDP_SAMPLER_OPTIONS_VERSION: u32 = 3;
pub type ddp_status = i32;
pub const DDP_OK: c_int = 0;
pub const DDP_E_INVALID_ARGUMENT: c_int = -1;
pub const DDP_E_STATE: c_int = -2;
pub const DDP_E_TIMEOUT: c_int = -3;
pub const DDP_E_PEER_FAILED: c_int = -4;
pub const DDP_E_BACKEND: c_int = -5;
pub const DDP_E_NOMEM: c_int = -6;
pub const DDP_E_UNSUPPORTED: c_int = -7;
pub const DDP_E_IO: c_int = -8;
pub const DDP_E_INTERNAL: c_int = -9;
pub const DDP_E_WORKER_FAILED: c_int = -10;
pub const DDP_FLOAT32: ddp_dtype = 0;
pub const DDP_FLOAT64: ddp_dtype = 1;
pub const DDP_FLOAT16: ddp_dtype = 2;
pub const DDP_BFLOAT16: ddp_dtype = 3;
pub const DDP_INT8: ddp_dtype = 4;
pub const DDP_UINT8: ddp_dtype = 5;
pub const DDP_INT32: ddp_dtype = 6;
pub const DDP_INT64: ddp_dtype = 7;
pub const DDP_BOOL: ddp_dtype = 8;
pub const DDP_DTYPE_FORCE_INT: ddp_dtype = 2147483647;
pub type ddp_dtype = c_uint;
pub const DDP_DEVICE_CPU: ddp_device_type = 0;
pub const DDP_DEVICE_CUDA: ddp_device_type = 1;
pub const DDP_DEVICE_TYPE_FORCE_INT: ddp_device_type = 2147483647;
pub type ddp_device_type = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_device {
    pub type_: ddp_device_type,
    pub index: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_buffer {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_tensor {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_env {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_group {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_group_options {
    pub version: c_uint,
    pub backend: *const c_char,
    pub timeout_ms: i64,
    pub device: ddp_device,
}
pub const DDP_SUM: ddp_reduce_op = 0;
pub const DDP_MEAN: ddp_reduce_op = 1;
pub const DDP_MIN: ddp_reduce_op = 2;
pub const DDP_MAX: ddp_reduce_op = 3;
pub const DDP_PRODUCT: ddp_reduce_op = 4;
pub const DDP_REDUCE_OP_FORCE_INT: ddp_reduce_op = 2147483647;
pub type ddp_reduce_op = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_work {
    _unused: [u8; 0],
}
pub const DDP_START_POPEN: ddp_start_method = 0;
pub const DDP_START_FORK: ddp_start_method = 1;
pub const DDP_START_METHOD_FORCE_INT: ddp_start_method = 2147483647;
pub type ddp_start_method = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_worker {
    _unused: [u8; 0],
}
pub type ddp_worker_fn = Option<
    unsafe extern "C" fn(
        worker: *mut ddp_worker,
        arg: *const c_void,
        arg_len: usize,
    ) -> c_int,
>;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_spawn_options {
    pub version: c_uint,
    pub nprocs: c_int,
    pub start_method: ddp_start_method,
    pub master_addr: *const c_char,
    pub master_port: c_int,
    pub timeout_ms: i64,
    pub grace_ms: i64,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_comm_hook {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_powersgd_options {
    pub version: c_uint,
    pub matrix_approximation_rank: c_int,
    pub start_powersgd_iter: i64,
    pub min_compression_rate: f64,
    pub use_error_feedback: c_int,
    pub warm_start: c_int,
    pub orthogonalization_epsilon: f64,
    pub random_seed: u32,
    pub batch_tensors_with_same_shape: c_int,
    pub batched: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_compression_stats {
    pub numel_before: u64,
    pub numel_after: u64,
    pub iteration: i64,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_comm_bucket {
    pub buffer: *mut ddp_tensor,
    pub index: usize,
    pub is_last: c_int,
    pub divisor: c_int,
    pub num_params: usize,
    pub param_indices: *const usize,
    pub offsets: *const i64,
    pub ndims: *const usize,
    pub shapes: *const *const i64,
}
pub type ddp_comm_hook_fn = Option<
    unsafe extern "C" fn(
        group: *mut ddp_group,
        bucket: *const ddp_comm_bucket,
        user_data: *mut c_void,
    ) -> ddp_status,
>;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_model_averager {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_reducer {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_reducer_options {
    pub version: c_uint,
    pub bucket_cap_mb: f64,
    pub first_bucket_mb: f64,
    pub find_unused_parameters: c_int,
    pub gradient_as_bucket_view: c_int,
    pub broadcast_parameters: c_int,
    pub autograd_hooks: c_int,
    pub join_enabled: c_int,
    pub static_graph: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_sampler_options {
    pub version: c_uint,
    pub shuffle: c_int,
    pub seed: i64,
    pub drop_last: c_int,
    pub unrepeated: c_int,
    pub start: i64,
}

pub const DDP_ADAM_OPTIONS_VERSION: u32 = 1;
pub const DDP_LOSS_OPTIONS_VERSION: u32 = 1;
pub const DDP_SGD_OPTIONS_VERSION: u32 = 1;
pub const DDP_STRATEGY_DDP: ddp_strategy_kind = 0;
pub const DDP_STRATEGY_DDP_FORK: ddp_strategy_kind = 2;
pub const DDP_STRATEGY_DDP_SPAWN: ddp_strategy_kind = 1;
pub const DDP_STRATEGY_KIND_FORCE_INT: ddp_strategy_kind = 2147483647;
pub const DDP_STRATEGY_OPTIONS_VERSION: u32 = 5;
pub type ddp_strategy_kind = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_adam_options {
    pub version: c_uint,
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_module {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_optimizer {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_lr_scheduler {
    _unused: [u8; 0],
}
pub const DDP_LR_STEP: ddp_lr_scheduler_kind = 0;
pub const DDP_LR_MULTI_STEP: ddp_lr_scheduler_kind = 1;
pub const DDP_LR_EXPONENTIAL: ddp_lr_scheduler_kind = 2;
pub const DDP_LR_COSINE_ANNEALING: ddp_lr_scheduler_kind = 3;
pub const DDP_LR_LINEAR: ddp_lr_scheduler_kind = 4;
pub const DDP_LR_ONE_CYCLE: ddp_lr_scheduler_kind = 5;
pub const DDP_LR_REDUCE_ON_PLATEAU: ddp_lr_scheduler_kind = 6;
pub type ddp_lr_scheduler_kind = c_uint;
pub const DDP_LR_SCHEDULER_OPTIONS_VERSION: u32 = 1;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_lr_scheduler_options {
    pub version: c_uint,
    pub kind: ddp_lr_scheduler_kind,
    pub step_size: i64,
    pub milestones: *const i64,
    pub num_milestones: usize,
    pub gamma: f64,
    pub t_max: i64,
    pub eta_min: f64,
    pub start_factor: f64,
    pub end_factor: f64,
    pub total_iters: i64,
    pub max_lr: f64,
    pub total_steps: i64,
    pub pct_start: f64,
    pub anneal_linear: c_int,
    pub cycle_momentum: c_int,
    pub base_momentum: f64,
    pub max_momentum: f64,
    pub div_factor: f64,
    pub final_div_factor: f64,
    pub three_phase: c_int,
    pub mode_max: c_int,
    pub factor: f64,
    pub patience: i64,
    pub threshold: f64,
    pub threshold_abs: c_int,
    pub cooldown: i64,
    pub min_lr: f64,
    pub eps: f64,
}
pub const DDP_CHECKPOINT_INFO_VERSION: u32 = 2;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_checkpoint_info {
    pub version: c_uint,
    pub step: i64,
    pub epoch: i64,
    pub batches_in_epoch: i64,
    pub user: *const c_void,
    pub user_len: usize,
    pub samples_in_epoch: i64,
    pub world_size: i64,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_sgd_options {
    pub version: c_uint,
    pub lr: f64,
    pub momentum: f64,
    pub dampening: f64,
    pub weight_decay: f64,
    pub nesterov: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_strategy {
    _unused: [u8; 0],
}
pub const DDP_CLIP_NORM: ddp_clip_algorithm = 0;
pub const DDP_CLIP_VALUE: ddp_clip_algorithm = 1;
pub const DDP_CLIP_ALGORITHM_FORCE_INT: ddp_clip_algorithm = 2147483647;
pub type ddp_clip_algorithm = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_cluster_callbacks {
    pub user_data: *mut c_void,
    pub world_size: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
    pub global_rank: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
    pub local_rank: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
    pub local_world_size: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
    pub node_rank: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
    pub main_address: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
        ) -> *const c_char,
    >,
    pub main_port: Option<
        unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
    >,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_byte_sink {
    _unused: [u8; 0],
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_checkpoint_io {
    pub user_data: *mut c_void,
    pub save: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            path: *const c_char,
            data: *const c_void,
            len: usize,
        ) -> c_int,
    >,
    pub load: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            path: *const c_char,
            sink: *mut ddp_byte_sink,
        ) -> c_int,
    >,
    pub remove: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            path: *const c_char,
        ) -> c_int,
    >,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_strategy_options {
    pub version: c_uint,
    pub kind: ddp_strategy_kind,
    pub accelerator: ddp_device_type,
    pub devices: c_int,
    pub backend: *const c_char,
    pub timeout_ms: i64,
    pub bucket_cap_mb: f64,
    pub first_bucket_mb: f64,
    pub find_unused_parameters: c_int,
    pub broadcast_buffers: c_int,
    pub comm_hook: *const ddp_comm_hook,
    pub model_averaging_period: i64,
    pub model_averaging_warmup: i64,
    pub sync_batchnorm: c_int,
    pub static_graph: c_int,
    pub gradient_as_bucket_view: c_int,
    pub precision: *const c_char,
    pub gradient_clip_val: f64,
    pub gradient_clip_algorithm: ddp_clip_algorithm,
    pub cluster_environment: *const ddp_env,
    pub cluster_callbacks: *const ddp_cluster_callbacks,
    pub checkpoint_io: *const ddp_checkpoint_io,
    pub state_dict_prefix: *const c_char,
    pub requeue_signal: c_int,
    pub join_enabled: c_int,
    pub divide_by_initial_world_size: c_int,
}

// ops.h, seed.h, metric.h and the multi-output calls of model.h and strategy.h
pub const DDP_OP_ADD: ddp_binary_op = 0;
pub const DDP_OP_SUB: ddp_binary_op = 1;
pub const DDP_OP_MUL: ddp_binary_op = 2;
pub const DDP_OP_DIV: ddp_binary_op = 3;
pub const DDP_OP_POW: ddp_binary_op = 4;
pub const DDP_OP_MAXIMUM: ddp_binary_op = 5;
pub const DDP_OP_MINIMUM: ddp_binary_op = 6;
pub const DDP_BINARY_OP_FORCE_INT: ddp_binary_op = 2147483647;
pub type ddp_binary_op = c_uint;
pub const DDP_OP_NEG: ddp_unary_op = 0;
pub const DDP_OP_EXP: ddp_unary_op = 1;
pub const DDP_OP_LOG: ddp_unary_op = 2;
pub const DDP_OP_SQRT: ddp_unary_op = 3;
pub const DDP_OP_ABS: ddp_unary_op = 4;
pub const DDP_OP_SQUARE: ddp_unary_op = 5;
pub const DDP_OP_RELU: ddp_unary_op = 6;
pub const DDP_OP_SIGMOID: ddp_unary_op = 7;
pub const DDP_OP_TANH: ddp_unary_op = 8;
pub const DDP_OP_LOG1P: ddp_unary_op = 9;
pub const DDP_OP_SIN: ddp_unary_op = 10;
pub const DDP_OP_COS: ddp_unary_op = 11;
pub const DDP_UNARY_OP_FORCE_INT: ddp_unary_op = 2147483647;
pub type ddp_unary_op = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_outputs {
    _unused: [u8; 0],
}
pub const DDP_LOSS_MSE: ddp_loss_kind = 0;
pub const DDP_LOSS_CROSS_ENTROPY: ddp_loss_kind = 1;
pub const DDP_LOSS_BCE_WITH_LOGITS: ddp_loss_kind = 2;
pub const DDP_LOSS_L1: ddp_loss_kind = 3;
pub const DDP_LOSS_SMOOTH_L1: ddp_loss_kind = 4;
pub const DDP_LOSS_HUBER: ddp_loss_kind = 5;
pub const DDP_LOSS_NLL: ddp_loss_kind = 6;
pub const DDP_LOSS_KL_DIV: ddp_loss_kind = 7;
pub const DDP_LOSS_KIND_FORCE_INT: ddp_loss_kind = 2147483647;
pub type ddp_loss_kind = c_uint;
pub const DDP_REDUCTION_MEAN: ddp_loss_reduction = 0;
pub const DDP_REDUCTION_SUM: ddp_loss_reduction = 1;
pub const DDP_REDUCTION_NONE: ddp_loss_reduction = 2;
pub const DDP_REDUCTION_BATCHMEAN: ddp_loss_reduction = 3;
pub const DDP_LOSS_REDUCTION_FORCE_INT: ddp_loss_reduction = 2147483647;
pub type ddp_loss_reduction = c_uint;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_loss_options {
    pub version: c_uint,
    pub kind: ddp_loss_kind,
    pub reduction: ddp_loss_reduction,
    pub weight: *const ddp_tensor,
    pub ignore_index: i64,
    pub label_smoothing: f64,
    pub pos_weight: *const ddp_tensor,
    pub beta: f64,
    pub delta: f64,
    pub log_target: c_int,
}
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_metric {
    _unused: [u8; 0],
}
pub const DDP_METRIC_MEAN: ddp_metric_reduce = 0;
pub const DDP_METRIC_SUM: ddp_metric_reduce = 1;
pub const DDP_METRIC_MAX: ddp_metric_reduce = 2;
pub const DDP_METRIC_MIN: ddp_metric_reduce = 3;
pub const DDP_METRIC_REDUCE_FORCE_INT: ddp_metric_reduce = 2147483647;
pub type ddp_metric_reduce = c_uint;
pub const DDP_PARAM_GROUP_VERSION: u32 = 1;
pub const DDP_INHERIT: f64 = -1.0;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct ddp_param_group {
    pub version: c_uint,
    pub patterns: *const *const c_char,
    pub num_patterns: usize,
    pub lr: f64,
    pub weight_decay: f64,
    pub momentum: f64,
}
#[link(name = "ddp")]
extern "C" {
    pub fn ddp_version_number() -> c_uint;
    pub fn ddp_version_string() -> *const c_char;
    pub fn ddp_status_string(status: ddp_status) -> *const c_char;
    pub fn ddp_last_error_message() -> *const c_char;
    pub fn ddp_error_clear();
    pub fn ddp_error_set(message: *const c_char);
    pub fn ddp_dtype_size(dtype: ddp_dtype) -> usize;
    pub fn ddp_dtype_name(dtype: ddp_dtype) -> *const c_char;
    pub fn ddp_buffer_data(buf: *const ddp_buffer) -> *const c_void;
    pub fn ddp_buffer_size(buf: *const ddp_buffer) -> usize;
    pub fn ddp_buffer_free(buf: *mut ddp_buffer);
    pub fn ddp_tensor_from_blob(
        out: *mut *mut ddp_tensor,
        data: *mut c_void,
        dtype: ddp_dtype,
        shape: *const i64,
        ndim: usize,
    ) -> ddp_status;
    pub fn ddp_tensor_new(
        out: *mut *mut ddp_tensor,
        dtype: ddp_dtype,
        shape: *const i64,
        ndim: usize,
        device: ddp_device,
    ) -> ddp_status;
    pub fn ddp_tensor_from_aten(
        out: *mut *mut ddp_tensor,
        aten_tensor: *const c_void,
    ) -> ddp_status;
    pub fn ddp_tensor_to_aten(t: *const ddp_tensor, aten_out: *mut c_void) -> ddp_status;
    pub fn ddp_tensor_from_dlpack(out: *mut *mut ddp_tensor, dl_managed_tensor: *mut c_void) -> ddp_status;
    pub fn ddp_tensor_to_dlpack(t: *const ddp_tensor, dl_managed_tensor: *mut *mut c_void) -> ddp_status;
    pub fn ddp_torch_version() -> *const c_char;
    pub fn ddp_torch_check_version(caller_version: *const c_char) -> ddp_status;
    pub fn ddp_tensor_free(t: *mut ddp_tensor);
    pub fn ddp_tensor_data(t: *const ddp_tensor) -> *mut c_void;
    pub fn ddp_tensor_ndim(t: *const ddp_tensor) -> usize;
    pub fn ddp_tensor_shape(t: *const ddp_tensor) -> *const i64;
    pub fn ddp_tensor_dtype(t: *const ddp_tensor) -> ddp_dtype;
    pub fn ddp_tensor_numel(t: *const ddp_tensor) -> i64;
    pub fn ddp_tensor_nbytes(t: *const ddp_tensor) -> usize;
    pub fn ddp_tensor_device(t: *const ddp_tensor) -> ddp_device;
    pub fn ddp_tensor_copy_to(
        t: *const ddp_tensor,
        dst: *mut c_void,
        nbytes: usize,
    ) -> ddp_status;
    pub fn ddp_tensor_copy_from(
        t: *mut ddp_tensor,
        src: *const c_void,
        nbytes: usize,
    ) -> ddp_status;
    pub fn ddp_env_detect(out: *mut *mut ddp_env) -> ddp_status;
    pub fn ddp_env_from_vars(
        out: *mut *mut ddp_env,
        vars: *const *const c_char,
        name: *const c_char,
    ) -> ddp_status;
    pub fn ddp_env_from_name(
        out: *mut *mut ddp_env,
        name: *const c_char,
    ) -> ddp_status;
    pub fn ddp_env_new(
        out: *mut *mut ddp_env,
        rank: c_int,
        world_size: c_int,
        local_rank: c_int,
        local_world_size: c_int,
        node_rank: c_int,
        master_addr: *const c_char,
        master_port: c_int,
    ) -> ddp_status;
    pub fn ddp_env_name(env: *const ddp_env) -> *const c_char;
    pub fn ddp_env_rank(env: *const ddp_env) -> c_int;
    pub fn ddp_env_world_size(env: *const ddp_env) -> c_int;
    pub fn ddp_env_local_rank(env: *const ddp_env) -> c_int;
    pub fn ddp_env_local_world_size(env: *const ddp_env) -> c_int;
    pub fn ddp_env_node_rank(env: *const ddp_env) -> c_int;
    pub fn ddp_env_master_addr(env: *const ddp_env) -> *const c_char;
    pub fn ddp_env_master_port(env: *const ddp_env) -> c_int;
    pub fn ddp_env_free(env: *mut ddp_env);
    pub fn ddp_group_options_init(
        opts: *mut ddp_group_options,
        version: c_uint,
    ) -> ddp_status;
    pub fn ddp_group_init(
        out: *mut *mut ddp_group,
        env: *const ddp_env,
        opts: *const ddp_group_options,
    ) -> ddp_status;
    pub fn ddp_group_new_subgroups(
        parent: *mut ddp_group,
        group_size: c_int,
        out: *mut *mut ddp_group,
    ) -> ddp_status;
    pub fn ddp_group_rank(g: *const ddp_group) -> c_int;
    pub fn ddp_group_size(g: *const ddp_group) -> c_int;
    pub fn ddp_group_backend(g: *const ddp_group) -> *const c_char;
    pub fn ddp_group_timeout_ms(g: *const ddp_group) -> i64;
    pub fn ddp_group_set_timeout(g: *mut ddp_group, timeout_ms: i64) -> ddp_status;
    pub fn ddp_group_set_debug_detail(g: *mut ddp_group, enabled: c_int) -> ddp_status;
    pub fn ddp_group_debug_detail(g: *const ddp_group) -> c_int;
    pub fn ddp_group_is_broken(g: *const ddp_group) -> c_int;
    pub fn ddp_group_free(g: *mut ddp_group);
    pub fn ddp_work_wait(work: *mut ddp_work, timeout_ms: i64) -> ddp_status;
    pub fn ddp_work_is_completed(
        work: *mut ddp_work,
        out: *mut c_int,
    ) -> ddp_status;
    pub fn ddp_work_result_count(work: *const ddp_work) -> usize;
    pub fn ddp_work_result_tensor(
        work: *mut ddp_work,
        index: usize,
        out: *mut *mut ddp_tensor,
    ) -> ddp_status;
    pub fn ddp_work_result_buffer(work: *mut ddp_work, out: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_work_result_decision(
        work: *mut ddp_work,
        out: *mut c_int,
    ) -> ddp_status;
    pub fn ddp_work_free(work: *mut ddp_work);
    pub fn ddp_barrier(g: *mut ddp_group) -> ddp_status;
    pub fn ddp_barrier_async(g: *mut ddp_group, out: *mut *mut ddp_work) -> ddp_status;
    pub fn ddp_broadcast(
        g: *mut ddp_group,
        t: *mut ddp_tensor,
        src: c_int,
    ) -> ddp_status;
    pub fn ddp_broadcast_async(
        g: *mut ddp_group,
        t: *mut ddp_tensor,
        src: c_int,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_broadcast_bytes(
        g: *mut ddp_group,
        data: *const c_void,
        len: usize,
        src: c_int,
        out: *mut *mut ddp_buffer,
    ) -> ddp_status;
    pub fn ddp_broadcast_bytes_async(
        g: *mut ddp_group,
        data: *const c_void,
        len: usize,
        src: c_int,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_all_reduce(g: *mut ddp_group, t: *mut ddp_tensor, op: ddp_reduce_op) -> ddp_status;
    pub fn ddp_all_reduce_async(
        g: *mut ddp_group,
        t: *mut ddp_tensor,
        op: ddp_reduce_op,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_reduce(
        g: *mut ddp_group,
        t: *mut ddp_tensor,
        dst: c_int,
        op: ddp_reduce_op,
    ) -> ddp_status;
    pub fn ddp_reduce_async(
        g: *mut ddp_group,
        t: *mut ddp_tensor,
        dst: c_int,
        op: ddp_reduce_op,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_all_gather(
        g: *mut ddp_group,
        in_: *const ddp_tensor,
        out: *mut *mut ddp_tensor,
    ) -> ddp_status;
    pub fn ddp_all_gather_async(
        g: *mut ddp_group,
        in_: *const ddp_tensor,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_all_gather_into_tensor(g: *mut ddp_group, in_: *const ddp_tensor, out: *mut ddp_tensor) -> ddp_status;
    pub fn ddp_all_gather_into_tensor_async(
        g: *mut ddp_group,
        in_: *const ddp_tensor,
        out: *mut ddp_tensor,
        work: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_all_gather_uneven(
        g: *mut ddp_group,
        in_: *const ddp_tensor,
        out: *mut *mut ddp_tensor,
    ) -> ddp_status;
    pub fn ddp_all_gather_uneven_async(
        g: *mut ddp_group,
        in_: *const ddp_tensor,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_reduce_boolean_decision(
        g: *mut ddp_group,
        decision: c_int,
        all: c_int,
        out: *mut c_int,
    ) -> ddp_status;
    pub fn ddp_reduce_boolean_decision_async(
        g: *mut ddp_group,
        decision: c_int,
        all: c_int,
        out: *mut *mut ddp_work,
    ) -> ddp_status;
    pub fn ddp_spawn_options_init(
        opts: *mut ddp_spawn_options,
        version: c_uint,
    ) -> ddp_status;
    pub fn ddp_spawn(
        opts: *const ddp_spawn_options,
        fn_: ddp_worker_fn,
        arg: *const c_void,
        arg_len: usize,
        rank0_result: *mut *mut ddp_buffer,
    ) -> ddp_status;
    pub fn ddp_worker_rank(worker: *const ddp_worker) -> c_int;
    pub fn ddp_worker_world_size(worker: *const ddp_worker) -> c_int;
    pub fn ddp_worker_local_rank(worker: *const ddp_worker) -> c_int;
    pub fn ddp_worker_set_result(
        worker: *mut ddp_worker,
        data: *const c_void,
        len: usize,
    ) -> ddp_status;
    pub fn ddp_comm_hook_allreduce(out: *mut *mut ddp_comm_hook) -> ddp_status;
    pub fn ddp_comm_hook_fp16_compress(out: *mut *mut ddp_comm_hook) -> ddp_status;
    pub fn ddp_comm_hook_bf16_compress(out: *mut *mut ddp_comm_hook) -> ddp_status;
    pub fn ddp_comm_hook_wrap_fp16(
        out: *mut *mut ddp_comm_hook,
        inner: *const ddp_comm_hook,
    ) -> ddp_status;
    pub fn ddp_comm_hook_wrap_bf16(
        out: *mut *mut ddp_comm_hook,
        inner: *const ddp_comm_hook,
    ) -> ddp_status;
    pub fn ddp_comm_hook_noop(out: *mut *mut ddp_comm_hook) -> ddp_status;
    pub fn ddp_powersgd_options_init(
        opts: *mut ddp_powersgd_options,
        version: c_uint,
    ) -> ddp_status;
    pub fn ddp_comm_hook_powersgd(
        out: *mut *mut ddp_comm_hook,
        opts: *const ddp_powersgd_options,
    ) -> ddp_status;
    pub fn ddp_comm_hook_compression_stats(
        hook: *const ddp_comm_hook,
        out: *mut ddp_compression_stats,
    ) -> ddp_status;
    pub fn ddp_comm_hook_post_localsgd(
        out: *mut *mut ddp_comm_hook,
        subgroup: *mut ddp_group,
        start_localsgd_iter: i64,
        post_local_gradient_allreduce: c_int,
    ) -> ddp_status;
    pub fn ddp_comm_hook_custom(
        out: *mut *mut ddp_comm_hook,
        fn_: ddp_comm_hook_fn,
        user_data: *mut c_void,
    ) -> ddp_status;
    pub fn ddp_comm_hook_free(hook: *mut ddp_comm_hook);
    pub fn ddp_model_averager_new(
        out: *mut *mut ddp_model_averager,
        group: *mut ddp_group,
        period: i64,
        warmup_steps: i64,
    ) -> ddp_status;
    pub fn ddp_model_averager_step(
        avg: *mut ddp_model_averager,
        params: *const *mut ddp_tensor,
        n: usize,
    ) -> ddp_status;
    pub fn ddp_model_averager_free(avg: *mut ddp_model_averager);
    pub fn ddp_reducer_options_init(
        opts: *mut ddp_reducer_options,
        version: c_uint,
    ) -> ddp_status;
    pub fn ddp_reducer_new(
        out: *mut *mut ddp_reducer,
        group: *mut ddp_group,
        params: *const *mut ddp_tensor,
        grads: *const *mut ddp_tensor,
        n: usize,
        opts: *const ddp_reducer_options,
    ) -> ddp_status;
    pub fn ddp_reducer_mark_ready(r: *mut ddp_reducer, index: usize) -> ddp_status;
    pub fn ddp_reducer_finish(r: *mut ddp_reducer) -> ddp_status;
    pub fn ddp_reducer_set_sync(r: *mut ddp_reducer, enabled: c_int) -> ddp_status;
    pub fn ddp_reducer_join(r: *mut ddp_reducer) -> ddp_status;
    pub fn ddp_reducer_set_comm_hook(r: *mut ddp_reducer, hook: *const ddp_comm_hook)
        -> ddp_status;
    pub fn ddp_reducer_bucket_count(r: *const ddp_reducer) -> usize;
    pub fn ddp_reducer_bucket_indices(
        r: *const ddp_reducer,
        bucket: usize,
        out: *mut usize,
        cap: usize,
        count: *mut usize,
    ) -> ddp_status;
    pub fn ddp_reducer_gradient(
        r: *const ddp_reducer,
        index: usize,
        out: *mut *mut ddp_tensor,
    ) -> ddp_status;
    pub fn ddp_reducer_free(r: *mut ddp_reducer);
    pub fn ddp_sampler_options_init(opts: *mut ddp_sampler_options, version: c_uint) -> ddp_status;
    pub fn ddp_sampler_num_samples(
        dataset_size: i64,
        num_replicas: c_int,
        drop_last: c_int,
        out: *mut i64,
    ) -> ddp_status;
    pub fn ddp_sampler_indices(
        dataset_size: i64,
        num_replicas: c_int,
        rank: c_int,
        epoch: i64,
        opts: *const ddp_sampler_options,
        out: *mut i64,
        cap: usize,
        count: *mut usize,
    ) -> ddp_status;
    pub fn ddp_loss_cross_entropy(input: *const ddp_tensor, target: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_loss_mse(input: *const ddp_tensor, target: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_module_forward(m: *mut ddp_module, input: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_module_free(m: *mut ddp_module);
    pub fn ddp_module_save(m: *const ddp_module, path: *const c_char) -> ddp_status;
    pub fn ddp_module_state_count(m: *const ddp_module) -> usize;
    pub fn ddp_module_state_name(m: *const ddp_module, index: usize, name: *mut *const c_char, is_parameter: *mut c_int) -> ddp_status;
    pub fn ddp_module_get(m: *const ddp_module, name: *const c_char, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_module_set(m: *mut ddp_module, name: *const c_char, value: *const ddp_tensor) -> ddp_status;
    pub fn ddp_module_save_state_dict(m: *const ddp_module, path: *const c_char) -> ddp_status;
    pub fn ddp_module_load_state_dict(m: *mut ddp_module, path: *const c_char, strict: c_int) -> ddp_status;
    pub fn ddp_optimizer_lr(opt: *const ddp_optimizer, out: *mut f64) -> ddp_status;
    pub fn ddp_optimizer_set_lr(opt: *mut ddp_optimizer, lr: f64) -> ddp_status;
    pub fn ddp_lr_scheduler_options_init(opts: *mut ddp_lr_scheduler_options, version: c_uint, kind: ddp_lr_scheduler_kind) -> ddp_status;
    pub fn ddp_lr_scheduler_new(out: *mut *mut ddp_lr_scheduler, opt: *mut ddp_optimizer, o: *const ddp_lr_scheduler_options) -> ddp_status;
    pub fn ddp_lr_scheduler_new_sequential(out: *mut *mut ddp_lr_scheduler, opt: *mut ddp_optimizer, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, milestones: *const i64) -> ddp_status;
    pub fn ddp_lr_scheduler_step(s: *mut ddp_lr_scheduler) -> ddp_status;
    pub fn ddp_lr_scheduler_step_metric(s: *mut ddp_lr_scheduler, metric: f64) -> ddp_status;
    pub fn ddp_lr_scheduler_last_lr(s: *const ddp_lr_scheduler, out: *mut f64) -> ddp_status;
    pub fn ddp_lr_scheduler_free(s: *mut ddp_lr_scheduler);
    pub fn ddp_module_load(out: *mut *mut ddp_module, path: *const c_char) -> ddp_status;
    pub fn ddp_module_num_parameters(m: *const ddp_module) -> usize;
    pub fn ddp_module_train(m: *mut ddp_module, on: c_int) -> ddp_status;
    pub fn ddp_optimizer_free(opt: *mut ddp_optimizer);
    pub fn ddp_optimizer_new_adam(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_adam_options) -> ddp_status;
    pub fn ddp_optimizer_new_adamw(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_adam_options) -> ddp_status;
    pub fn ddp_optimizer_new_sgd(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_sgd_options) -> ddp_status;
    pub fn ddp_optimizer_from_torch(out: *mut *mut ddp_optimizer, torch_optimizer: *mut c_void) -> ddp_status;
    pub fn ddp_optimizer_zero_grad(opt: *mut ddp_optimizer) -> ddp_status;
    pub fn ddp_strategy_backward(s: *mut ddp_strategy, loss: *const ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_barrier(s: *mut ddp_strategy, name: *const c_char) -> ddp_status;
    pub fn ddp_strategy_block_backward_sync(s: *mut ddp_strategy, on: c_int) -> ddp_status;
    pub fn ddp_strategy_forward(s: *mut ddp_strategy, m: *mut ddp_module, input: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_free(s: *mut ddp_strategy);
    pub fn ddp_strategy_global_rank(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_group(s: *mut ddp_strategy) -> *mut ddp_group;
    pub fn ddp_strategy_is_global_zero(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_load_checkpoint(s: *mut ddp_strategy, path: *const c_char, m: *mut ddp_module, opt: *mut ddp_optimizer, step: *mut i64, epoch: *mut i64, user: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_strategy_local_rank(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_new(out: *mut *mut ddp_strategy, opts: *const ddp_strategy_options) -> ddp_status;
    pub fn ddp_strategy_node_rank(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_optimizer_step(s: *mut ddp_strategy, opt: *mut ddp_optimizer) -> ddp_status;
    pub fn ddp_strategy_options_init(opts: *mut ddp_strategy_options, version: c_uint) -> ddp_status;
    pub fn ddp_strategy_reduce(s: *mut ddp_strategy, t: *mut ddp_tensor, op: ddp_reduce_op) -> ddp_status;
    pub fn ddp_strategy_root_device(s: *const ddp_strategy) -> ddp_device;
    pub fn ddp_strategy_save_checkpoint(s: *mut ddp_strategy, path: *const c_char, m: *const ddp_module, opt: *const ddp_optimizer, step: i64, epoch: i64, user: *const c_void, user_len: usize) -> ddp_status;
    pub fn ddp_strategy_setup_environment(s: *mut ddp_strategy) -> ddp_status;
    pub fn ddp_strategy_setup_module(s: *mut ddp_strategy, m: *mut ddp_module) -> ddp_status;
    pub fn ddp_strategy_teardown(s: *mut ddp_strategy) -> ddp_status;
    pub fn ddp_strategy_world_size(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_broadcast_bytes(s: *mut ddp_strategy, data: *const c_void, len: usize, src: c_int, out: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_strategy_all_gather(s: *mut ddp_strategy, in_: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_all_gather_uneven(s: *mut ddp_strategy, in_: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_reduce_boolean_decision(s: *mut ddp_strategy, decision: c_int, all: c_int, out: *mut c_int) -> ddp_status;
    pub fn ddp_loss_scale(loss: *const ddp_tensor, factor: f64, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_byte_sink_write(
        sink: *mut ddp_byte_sink,
        data: *const c_void,
        len: usize,
    ) -> ddp_status;
    pub fn ddp_strategy_devices(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_sync_batchnorm_layers(s: *const ddp_strategy) -> c_int;
    pub fn ddp_strategy_precision(s: *const ddp_strategy) -> *const c_char;
    pub fn ddp_strategy_precision_warning(s: *const ddp_strategy) -> *const c_char;
    pub fn ddp_strategy_optimizer_step_v2(s: *mut ddp_strategy, opt: *mut ddp_optimizer, stepped: *mut c_int) -> ddp_status;
    pub fn ddp_strategy_all_gather_v2(s: *mut ddp_strategy, in_: *const ddp_tensor, sync_grads: c_int, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_remove_checkpoint(s: *mut ddp_strategy, path: *const c_char) -> ddp_status;
    pub fn ddp_strategy_save_checkpoint_v2(s: *mut ddp_strategy, path: *const c_char, m: *const ddp_module, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, info: *const ddp_checkpoint_info) -> ddp_status;
    pub fn ddp_strategy_load_checkpoint_v2(s: *mut ddp_strategy, path: *const c_char, m: *mut ddp_module, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, info: *mut ddp_checkpoint_info, user: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_strategy_save_module(s: *mut ddp_strategy, path: *const c_char, m: *const ddp_module) -> ddp_status;
    pub fn ddp_tensor_binary(op: ddp_binary_op, a: *const ddp_tensor, b: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_binary_scalar(op: ddp_binary_op, a: *const ddp_tensor, scalar: f64, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_unary(op: ddp_unary_op, a: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_softmax(a: *const ddp_tensor, dim: i64, log: c_int, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_sum(a: *const ddp_tensor, dims: *const i64, ndims: usize, keepdim: c_int, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_mean(a: *const ddp_tensor, dims: *const i64, ndims: usize, keepdim: c_int, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_item(t: *const ddp_tensor, out: *mut f64) -> ddp_status;
    pub fn ddp_tensor_clone(t: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_set_requires_grad(t: *mut ddp_tensor, on: c_int) -> ddp_status;
    pub fn ddp_tensor_requires_grad(t: *const ddp_tensor) -> c_int;
    pub fn ddp_tensor_grad(t: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_tensor_backward(t: *const ddp_tensor) -> ddp_status;
    pub fn ddp_grad_set_enabled(enabled: c_int, previous: *mut c_int) -> ddp_status;
    pub fn ddp_grad_is_enabled() -> c_int;
    pub fn ddp_seed_everything(seed: i64, workers: c_int, used: *mut i64) -> ddp_status;
    pub fn ddp_reset_seed(seeded: *mut c_int) -> ddp_status;
    pub fn ddp_set_deterministic(on: c_int, warn_only: c_int) -> ddp_status;
    pub fn ddp_is_deterministic() -> c_int;
    pub fn ddp_module_call(m: *mut ddp_module, method: *const c_char, inputs: *const *const ddp_tensor, num_inputs: usize, out: *mut *mut ddp_outputs) -> ddp_status;
    pub fn ddp_outputs_count(o: *const ddp_outputs) -> usize;
    pub fn ddp_outputs_at(o: *const ddp_outputs, index: usize, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_outputs_get(o: *const ddp_outputs, key: *const c_char, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_outputs_key(o: *const ddp_outputs, index: usize) -> *const c_char;
    pub fn ddp_outputs_free(o: *mut ddp_outputs);
    pub fn ddp_module_grad(m: *const ddp_module, name: *const c_char, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_loss_options_init(opts: *mut ddp_loss_options, version: c_uint, kind: ddp_loss_kind) -> ddp_status;
    pub fn ddp_loss_compute(opts: *const ddp_loss_options, input: *const ddp_tensor, target: *const ddp_tensor, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_call(s: *mut ddp_strategy, m: *mut ddp_module, method: *const c_char, inputs: *const *const ddp_tensor, num_inputs: usize, out: *mut *mut ddp_outputs) -> ddp_status;
    pub fn ddp_metric_new(out: *mut *mut ddp_metric, reduce: ddp_metric_reduce) -> ddp_status;
    pub fn ddp_metric_update(m: *mut ddp_metric, value: f64, batch_size: i64) -> ddp_status;
    pub fn ddp_metric_compute(m: *const ddp_metric, s: *mut ddp_strategy, out: *mut f64) -> ddp_status;
    pub fn ddp_metric_reset(m: *mut ddp_metric) -> ddp_status;
    pub fn ddp_metric_free(m: *mut ddp_metric);
    pub fn ddp_optimizer_new_sgd_groups(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_sgd_options, groups: *const ddp_param_group, num_groups: usize) -> ddp_status;
    pub fn ddp_optimizer_new_adam_groups(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_adam_options, groups: *const ddp_param_group, num_groups: usize) -> ddp_status;
    pub fn ddp_optimizer_new_adamw_groups(out: *mut *mut ddp_optimizer, m: *mut ddp_module, opts: *const ddp_adam_options, groups: *const ddp_param_group, num_groups: usize) -> ddp_status;
    pub fn ddp_optimizer_num_groups(opt: *const ddp_optimizer) -> usize;
    pub fn ddp_optimizer_group_lr(opt: *const ddp_optimizer, group: usize, out: *mut f64) -> ddp_status;
    pub fn ddp_optimizer_set_group_lr(opt: *mut ddp_optimizer, group: usize, lr: f64) -> ddp_status;
    pub fn ddp_strategy_save_checkpoint_v3(s: *mut ddp_strategy, path: *const c_char, modules: *const *mut ddp_module, prefixes: *const *const c_char, num_modules: usize, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, info: *const ddp_checkpoint_info) -> ddp_status;
    pub fn ddp_strategy_load_checkpoint_v3(s: *mut ddp_strategy, path: *const c_char, modules: *const *mut ddp_module, prefixes: *const *const c_char, num_modules: usize, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, info: *mut ddp_checkpoint_info, user: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_strategy_save_checkpoint_to_dir(s: *mut ddp_strategy, dir: *const c_char, keep_last: c_int, modules: *const *mut ddp_module, prefixes: *const *const c_char, num_modules: usize, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, info: *const ddp_checkpoint_info) -> ddp_status;
    pub fn ddp_strategy_resume_from_dir(s: *mut ddp_strategy, dir: *const c_char, modules: *const *mut ddp_module, prefixes: *const *const c_char, num_modules: usize, opts: *const *mut ddp_optimizer, num_opts: usize, scheds: *const *mut ddp_lr_scheduler, num_scheds: usize, resumed: *mut c_int, info: *mut ddp_checkpoint_info, user: *mut *mut ddp_buffer, report: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_module_load_state_dict_nonstrict(m: *mut ddp_module, path: *const c_char, skipped: *mut *mut ddp_buffer) -> ddp_status;
    pub fn ddp_strategy_reduce_v2(s: *mut ddp_strategy, t: *mut ddp_tensor, op: ddp_reduce_op, group: *mut ddp_group) -> ddp_status;
    pub fn ddp_strategy_all_gather_v3(s: *mut ddp_strategy, input: *const ddp_tensor, sync_grads: c_int, group: *mut ddp_group, out: *mut *mut ddp_tensor) -> ddp_status;
    pub fn ddp_strategy_requeue_requested(s: *mut ddp_strategy, out: *mut c_int) -> ddp_status;
    pub fn ddp_strategy_requeue(s: *mut ddp_strategy) -> ddp_status;
    pub fn ddp_strategy_join(s: *mut ddp_strategy) -> ddp_status;
    pub fn ddp_module_call_v2(m: *mut ddp_module, method: *const c_char, inputs: *const *const ddp_tensor, num_inputs: usize, kw_names: *const *const c_char, kw_values: *const *const ddp_tensor, num_kw: usize, out: *mut *mut ddp_outputs) -> ddp_status;
    pub fn ddp_strategy_call_v2(s: *mut ddp_strategy, m: *mut ddp_module, method: *const c_char, inputs: *const *const ddp_tensor, num_inputs: usize, kw_names: *const *const c_char, kw_values: *const *const ddp_tensor, num_kw: usize, out: *mut *mut ddp_outputs) -> ddp_status;
    pub fn ddp_module_from_tensors(out: *mut *mut ddp_module, names: *const *const c_char, tensors: *const *mut ddp_tensor, is_buffer: *const c_int, n: usize) -> ddp_status;
    pub fn ddp_strategy_batch_norm(
        s: *mut ddp_strategy,
        input: *const ddp_tensor,
        weight: *const ddp_tensor,
        bias: *const ddp_tensor,
        running_mean: *mut ddp_tensor,
        running_var: *mut ddp_tensor,
        training: c_int,
        momentum: f64,
        eps: f64,
        out: *mut *mut ddp_tensor,
    ) -> ddp_status;
    pub fn ddp_strategy_forward_begin(s: *mut ddp_strategy, m: *mut ddp_module) -> ddp_status;
    pub fn ddp_strategy_forward_end(s: *mut ddp_strategy) -> ddp_status;
    pub fn ddp_strategy_optimizer_step_fn(
        s: *mut ddp_strategy,
        step: ::std::option::Option<
            unsafe extern "C" fn(user_data: *mut c_void) -> c_int,
        >,
        user_data: *mut c_void,
        stepped: *mut c_int,
    ) -> ddp_status;
}
