//! The training surface beyond the first slice: every DDPStrategy option,
//! the sampler, evaluation forwards and checkpoints with Lightning's
//! counters. Each function is one C API call (or two, sizing then filling).
use super::*;

/// How the ranks were started (`ddp_strategy_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StrategyKind {
    /// By a launcher (ddprun, torchrun, SLURM), or by this strategy running the program again.
    Ddp,
    /// Workers of `spawn` (popen).
    DdpSpawn,
    /// Workers of `spawn` (fork).
    DdpFork,
}

/// Lightning's gradient clipping algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClipAlgorithm {
    /// Scale the gradients so that their total 2-norm is at most the clip value.
    Norm,
    /// Clamp each gradient element into [-value, value].
    Value,
}

/// DDPStrategy's arguments with Lightning's and PyTorch's defaults
/// (`StrategyOptions::default()`); `strategy.h` documents each field.
#[derive(Clone)]
pub struct StrategyOptions<'h> {
    /// How the ranks were started.
    pub kind: StrategyKind,
    /// Each rank on `cuda:LOCAL_RANK` with NCCL (where libddp was built with CUDA).
    pub cuda: bool,
    /// Processes on this node; 0: the launcher's count.
    pub devices: i32,
    /// None: "shm" on the CPU, "nccl" for CUDA.
    pub backend: Option<String>,
    /// 0: 30 minutes (Lightning's default_pg_timeout).
    pub timeout_ms: i64,
    /// DDP's bucket size cap (25).
    pub bucket_cap_mb: f64,
    /// The first bucket's size (1).
    pub first_bucket_mb: f64,
    /// Parameters without a gradient in a step count as zeros.
    pub find_unused_parameters: bool,
    /// Rank 0's buffers before each forward (PyTorch's DDP default).
    pub broadcast_buffers: bool,
    /// None: all-reduce. The strategy takes its own reference.
    pub comm_hook: Option<&'h CommHook<'h>>,
    /// Parameters averaged every this many steps (post-local SGD); 0: off.
    pub model_averaging_period: i64,
    /// The first step that averages.
    pub model_averaging_warmup: i64,
    /// Batch norms synchronised over the group (torch.nn.SyncBatchNorm).
    pub sync_batchnorm: bool,
    /// DDP's static_graph (refused for now).
    pub static_graph: bool,
    /// Each parameter's gradient a view of its bucket.
    pub gradient_as_bucket_view: bool,
    /// None: "32-true"; "bf16-mixed", "16-mixed", "bf16-true", "16-true".
    pub precision: Option<String>,
    /// 0: no clipping.
    pub gradient_clip_val: f64,
    /// How [`StrategyOptions::gradient_clip_val`] clips.
    pub gradient_clip_algorithm: ClipAlgorithm,
    /// The LightningModule attribute holding the model, with its dot ("net.").
    pub state_dict_prefix: Option<String>,
    /// 0: SIGUSR1 under SLURM; -1: off.
    pub requeue_signal: i32,
    /// PyTorch's Join for uneven inputs: a rank out of batches calls the strategy's join.
    pub join_enabled: bool,
    /// With Join: average over the initial world size (joined ranks as zeros).
    pub divide_by_initial_world_size: bool,
    /// None: local files written atomically; else where checkpoints go (Lightning's CheckpointIO).
    pub checkpoint_io: Option<std::sync::Arc<dyn crate::CheckpointIo>>,
    /// None: detected from the environment; else asked at setup (Lightning's ClusterEnvironment).
    pub cluster_environment: Option<std::sync::Arc<dyn crate::ClusterEnvironment>>,
}

impl Default for StrategyOptions<'_> {
    fn default() -> Self {
        let o = raw_strategy_defaults();
        StrategyOptions {
            kind: StrategyKind::Ddp,
            cuda: false,
            devices: o.devices,
            backend: None,
            timeout_ms: o.timeout_ms,
            bucket_cap_mb: o.bucket_cap_mb,
            first_bucket_mb: o.first_bucket_mb,
            find_unused_parameters: o.find_unused_parameters != 0,
            broadcast_buffers: o.broadcast_buffers != 0,
            comm_hook: None,
            model_averaging_period: o.model_averaging_period,
            model_averaging_warmup: o.model_averaging_warmup,
            sync_batchnorm: o.sync_batchnorm != 0,
            static_graph: o.static_graph != 0,
            gradient_as_bucket_view: o.gradient_as_bucket_view != 0,
            precision: None,
            gradient_clip_val: o.gradient_clip_val,
            gradient_clip_algorithm: ClipAlgorithm::Norm,
            state_dict_prefix: None,
            requeue_signal: o.requeue_signal,
            join_enabled: o.join_enabled != 0,
            divide_by_initial_world_size: o.divide_by_initial_world_size != 0,
            checkpoint_io: None,
            cluster_environment: None,
        }
    }
}

fn raw_strategy_defaults() -> sys::ddp_strategy_options {
    let mut o = std::mem::MaybeUninit::<sys::ddp_strategy_options>::uninit();
    // SAFETY: ddp_strategy_options_init fills every field of this version.
    let status = unsafe { sys::ddp_strategy_options_init(o.as_mut_ptr(), sys::DDP_STRATEGY_OPTIONS_VERSION) };
    assert_eq!(status, sys::DDP_OK, "ddp_strategy_options_init refused its own version");
    unsafe { o.assume_init() }
}

fn optional_c_string(s: &Option<String>, what: &str) -> Result<Option<CString>> {
    s.as_deref()
        .map(|v| CString::new(v).map_err(|_| invalid(&format!("{what} contains NUL"))))
        .transpose()
}

impl Strategy {
    /// A strategy with every option of `options`.
    pub fn with_options(options: &StrategyOptions<'_>) -> Result<Strategy> {
        let backend = optional_c_string(&options.backend, "backend")?;
        let precision = optional_c_string(&options.precision, "precision")?;
        let prefix = optional_c_string(&options.state_dict_prefix, "state_dict_prefix")?;
        let mut o = raw_strategy_defaults();
        o.kind = match options.kind {
            StrategyKind::Ddp => sys::DDP_STRATEGY_DDP,
            StrategyKind::DdpSpawn => sys::DDP_STRATEGY_DDP_SPAWN,
            StrategyKind::DdpFork => sys::DDP_STRATEGY_DDP_FORK,
        };
        o.accelerator = if options.cuda { sys::DDP_DEVICE_CUDA } else { sys::DDP_DEVICE_CPU };
        o.devices = options.devices;
        o.backend = backend.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        o.timeout_ms = options.timeout_ms;
        o.bucket_cap_mb = options.bucket_cap_mb;
        o.first_bucket_mb = options.first_bucket_mb;
        o.find_unused_parameters = options.find_unused_parameters as c_int;
        o.broadcast_buffers = options.broadcast_buffers as c_int;
        o.comm_hook = options.comm_hook.map_or(ptr::null(), |h| h.0 as *const _);
        o.model_averaging_period = options.model_averaging_period;
        o.model_averaging_warmup = options.model_averaging_warmup;
        o.sync_batchnorm = options.sync_batchnorm as c_int;
        o.static_graph = options.static_graph as c_int;
        o.gradient_as_bucket_view = options.gradient_as_bucket_view as c_int;
        o.precision = precision.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        o.gradient_clip_val = options.gradient_clip_val;
        o.gradient_clip_algorithm = match options.gradient_clip_algorithm {
            ClipAlgorithm::Norm => sys::DDP_CLIP_NORM,
            ClipAlgorithm::Value => sys::DDP_CLIP_VALUE,
        };
        o.state_dict_prefix = prefix.as_ref().map_or(ptr::null(), |c| c.as_ptr());
        o.requeue_signal = options.requeue_signal;
        o.join_enabled = options.join_enabled as c_int;
        o.divide_by_initial_world_size = options.divide_by_initial_world_size as c_int;
        // SAFETY: plain C tables of pointers, all filled by install before use.
        let mut tables = unsafe { std::mem::zeroed() };
        let callbacks = crate::callbacks::Callbacks::install(&options.checkpoint_io, &options.cluster_environment,
                                                             &mut tables, &mut o);
        let mut s = ptr::null_mut();
        // The strings and tables are copied by ddp_strategy_new; they live until it returns.
        check(unsafe { sys::ddp_strategy_new(&mut s, &o) })?;
        Ok(Strategy(s, callbacks))
    }

    /// [`Strategy::train_step`], also returning the batch's logits (rows x classes, row-major).
    pub fn train_step_logits(
        &mut self,
        module: &mut Module,
        optimizer: &mut Optimizer,
        x: &mut [f32],
        y: &mut [i64],
    ) -> Result<(f32, Vec<f32>)> {
        let (loss, logits) = self.step_tensors(module, optimizer, x, y)?;
        Ok((loss.to_vec::<f32>()?[0], logits.to_vec::<f32>()?))
    }

    /// Lightning's checkpoint with its counters (epochs completed, optimizer
    /// steps, batches per epoch); global rank 0 writes it atomically. Collective.
    pub fn save_checkpoint_info(
        &mut self,
        path: &str,
        module: &Module,
        optimizer: &Optimizer,
        info: &CheckpointInfo,
    ) -> Result<()> {
        let p = CString::new(path).map_err(|_| invalid("path contains NUL"))?;
        let raw = info.raw();
        let opts = [optimizer.0];
        check(unsafe {
            sys::ddp_strategy_save_checkpoint_v2(self.0, p.as_ptr(), module.0, opts.as_ptr(), 1, ptr::null(), 0, &raw)
        })
    }
}

impl Strategy {
    /// Lightning's ModelCheckpoint(dirpath=dir, save_top_k=keep_last):
    /// `dir/epoch=E-step=S.ckpt` from `info`, the newest `keep_last` kept
    /// (0: all). Collective; global rank 0 writes, atomically.
    pub fn save_checkpoint_to_dir(
        &mut self,
        dir: &str,
        keep_last: i32,
        module: &Module,
        optimizer: &Optimizer,
        info: &CheckpointInfo,
    ) -> Result<()> {
        let d = CString::new(dir).map_err(|_| invalid("dir contains NUL"))?;
        let raw = info.raw();
        let (modules, opts) = ([module.0], [optimizer.0]);
        check(unsafe {
            sys::ddp_strategy_save_checkpoint_to_dir(
                self.0, d.as_ptr(), keep_last, modules.as_ptr(), ptr::null(), 1, opts.as_ptr(), 1, ptr::null(), 0, &raw,
            )
        })
    }

    /// Trainer.fit(ckpt_path="last"): the newest checkpoint in `dir` that
    /// every rank can load, into `module` and `optimizer`. `None` on a
    /// first start (nothing loaded); else the counters to continue from,
    /// the saving job's world size in `world_size`, and the report
    /// ("resumed from PATH", after a line for each newer file passed over).
    /// Collective.
    pub fn resume_from_dir(
        &mut self,
        dir: &str,
        module: &mut Module,
        optimizer: &mut Optimizer,
    ) -> Result<Option<(CheckpointInfo, i64, String)>> {
        let d = CString::new(dir).map_err(|_| invalid("dir contains NUL"))?;
        let mut raw = CheckpointInfo::default().raw();
        let (modules, opts) = ([module.0], [optimizer.0]);
        let (mut resumed, mut report): (c_int, *mut sys::ddp_buffer) = (0, ptr::null_mut());
        check(unsafe {
            sys::ddp_strategy_resume_from_dir(
                self.0, d.as_ptr(), modules.as_ptr(), ptr::null(), 1, opts.as_ptr(), 1, ptr::null(), 0, &mut resumed,
                &mut raw, ptr::null_mut(), &mut report,
            )
        })?;
        let report = super::extensions::take_buffer(report);
        let text = String::from_utf8_lossy(&report).trim_end_matches('\0').to_string();
        if resumed == 0 {
            return Ok(None);
        }
        let info = CheckpointInfo {
            step: raw.step,
            epoch: raw.epoch,
            batches_in_epoch: raw.batches_in_epoch,
            samples_in_epoch: raw.samples_in_epoch,
        };
        Ok(Some((info, raw.world_size, text)))
    }
}

/// What a checkpoint records besides the states (Lightning's counters).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Optimizer steps taken (Lightning's global_step).
    pub step: i64,
    /// Epochs completed.
    pub epoch: i64,
    /// Batches per epoch (the fit loop's progress Lightning resumes from).
    pub batches_in_epoch: i64,
    /// Inside an epoch: samples of the epoch's list trained on over every rank.
    pub samples_in_epoch: i64,
}

impl CheckpointInfo {
    pub(crate) fn raw(&self) -> sys::ddp_checkpoint_info {
        sys::ddp_checkpoint_info {
            version: sys::DDP_CHECKPOINT_INFO_VERSION,
            step: self.step,
            epoch: self.epoch,
            batches_in_epoch: self.batches_in_epoch,
            user: ptr::null(),
            user_len: 0,
            samples_in_epoch: self.samples_in_epoch,
            world_size: 0,
        }
    }
}

impl Module {
    /// Training mode on or off (dropout, batch norm statistics).
    pub fn train(&mut self, on: bool) -> Result<()> {
        check(unsafe { sys::ddp_module_train(self.0, on as c_int) })
    }

    /// The module's forward of `x` (`rows` rows), outside the strategy (evaluation); row-major output.
    pub fn forward(&mut self, x: &mut [f32], rows: usize) -> Result<Vec<f32>> {
        if rows == 0 || x.len() % rows != 0 {
            return Err(invalid("x must hold the same number of features in each of its rows"));
        }
        let xt = Tensor::view_shaped(x, &[rows as i64, (x.len() / rows) as i64])?;
        let mut out = ptr::null_mut();
        check(unsafe { sys::ddp_module_forward(self.0, xt.0, &mut out) })?;
        Tensor(out).to_vec::<f32>()
    }
}

/// DistributedSampler's keyword arguments, with its defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SamplerOptions {
    /// A permutation seeded by seed + epoch; false: 0, 1, 2, ...
    pub shuffle: bool,
    /// The same on every rank.
    pub seed: i64,
    /// Drop the tail instead of padding by wrapping around.
    pub drop_last: bool,
    /// Lightning's UnrepeatedDistributedSampler (evaluation).
    pub unrepeated: bool,
    /// A resumed epoch's position (a checkpoint's samples_in_epoch).
    pub start: i64,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions { shuffle: true, seed: 0, drop_last: false, unrepeated: false, start: 0 }
    }
}

/// DistributedSampler's `num_samples`: indices per rank.
pub fn sampler_num_samples(dataset_size: i64, num_replicas: i32, drop_last: bool) -> Result<i64> {
    let mut n = 0i64;
    check(unsafe { sys::ddp_sampler_num_samples(dataset_size, num_replicas, drop_last as c_int, &mut n) })?;
    Ok(n)
}

/// Rank `rank`'s indices for `epoch`, in DistributedSampler's order.
pub fn sampler_indices(
    dataset_size: i64,
    num_replicas: i32,
    rank: i32,
    epoch: i64,
    options: &SamplerOptions,
) -> Result<Vec<i64>> {
    let o = sys::ddp_sampler_options {
        version: sys::DDP_SAMPLER_OPTIONS_VERSION,
        shuffle: options.shuffle as c_int,
        seed: options.seed,
        drop_last: options.drop_last as c_int,
        unrepeated: options.unrepeated as c_int,
        start: options.start,
    };
    let mut count = 0usize;
    check(unsafe {
        sys::ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, &o, ptr::null_mut(), 0, &mut count)
    })?;
    let mut v = vec![0i64; count];
    check(unsafe {
        sys::ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, &o, v.as_mut_ptr(), v.len(), &mut count)
    })?;
    v.truncate(count);
    Ok(v)
}
