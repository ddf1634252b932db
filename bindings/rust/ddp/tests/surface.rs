//! The training surface from Rust on one process: tensor arithmetic and its
//! gradients, losses against their formulas, the grad mode, the metric,
//! parameter groups stepped through the strategy with the caller's own
//! forward, schedulers, and the strategy's and the group's collectives on a
//! world of one. (The same C calls are compared with torch itself by the
//! Python binding's tests.)
use ddp::{
    BinaryOp, Group, LossKind, LossOptions, LrScheduler, Metric, MetricReduce, Module, Optimizer, OptimizerKind,
    ParamGroup, ReduceOp, Strategy, Tensor, UnaryOp,
};

/// One strategy at a time in this process: setup installs process-wide state (torch's CPU allocator).
static ONE_STRATEGY: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * (1.0 + b.abs())
}

fn leaf(values: &[f32]) -> Tensor {
    let mut t = Tensor::from_slice(values, &[values.len() as i64]).unwrap();
    t.set_requires_grad(true).unwrap();
    t
}

#[test]
fn arithmetic_and_gradients() {
    let a = leaf(&[1.0, 2.0, 3.0]);
    let y = (&(&a * &a).unwrap() + 1.0).unwrap().sum(&[], false).unwrap();
    assert!(close(y.item().unwrap(), 17.0));
    y.backward().unwrap();
    assert_eq!(a.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0]);
    let m = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
    assert_eq!(m.mean(&[1], false).unwrap().to_vec::<f32>().unwrap(), vec![2.0, 5.0]);
    assert_eq!(m.sum(&[0], true).unwrap().shape(), vec![1, 3]);
    assert!(close(m.softmax(-1, false).unwrap().sum(&[], false).unwrap().item().unwrap(), 2.0));
    assert_eq!((-&m).unwrap().binary_scalar(BinaryOp::Maximum, -2.0).unwrap().to_vec::<f32>().unwrap(),
               vec![-1.0, -2.0, -2.0, -2.0, -2.0, -2.0]);
    assert!(close(m.unary(UnaryOp::Exp).unwrap().unary(UnaryOp::Log).unwrap().sum(&[], false).unwrap().item().unwrap(), 21.0));
    let e = a.binary(BinaryOp::Add, &Tensor::from_slice(&[1.0f32, 2.0], &[2]).unwrap()).err().unwrap();
    assert_eq!(e.status, ddp::sys::DDP_E_INVALID_ARGUMENT);
    assert!(e.message.contains("[3]") && e.message.contains("[2]"), "{}", e.message);
    assert!(Tensor::from_slice(&[1.0f32], &[2]).is_err()); // the shape does not fit the data
    assert!(Tensor::from_slice(&[1.0f32], &[i64::MAX, 2]).is_err()); // an overflowing shape, refused (no panic)
    assert!(Tensor::from_slice(&[1.0f32], &[-1, -1]).is_err()); // negative sizes whose product is 1

    assert!(ddp::set_grad_enabled(false).unwrap());
    assert!(!(&a * 2.0).unwrap().requires_grad());
    ddp::set_grad_enabled(true).unwrap();
    assert!(ddp::is_grad_enabled() && (&a * 2.0).unwrap().requires_grad());
    assert_eq!(ddp::seed_everything(99, false).unwrap(), 99);
    assert!(ddp::reset_seed().unwrap());
}

#[test]
fn losses_follow_their_formulas() {
    let x = leaf(&[0.2, -1.5, 3.0]);
    let zeros = Tensor::from_slice(&[0.0f32; 3], &[3]).unwrap();
    let mut huber = LossOptions::new(LossKind::Huber);
    huber.delta = 0.5;
    // 0.5 x^2 inside delta, delta (|x| - delta / 2) outside; the mean.
    let expected = (0.5 * 0.04 + 0.5 * (1.5 - 0.25) + 0.5 * (3.0 - 0.25)) / 3.0;
    assert!(close(huber.compute(&x, &zeros).unwrap().item().unwrap(), expected));
    let mut mse = LossOptions::new(LossKind::Mse);
    mse.reduction = ddp::Reduction::Sum;
    let l = mse.compute(&x, &zeros).unwrap();
    assert!(close(l.item().unwrap(), 0.04 + 2.25 + 9.0));
    l.backward().unwrap();
    let g = x.grad().unwrap().unwrap().to_vec::<f32>().unwrap();
    assert!(close(g[1] as f64, -3.0)); // 2 x
    let logits = Tensor::from_slice(&[1.0f32, 2.0, 0.5], &[1, 3]).unwrap();
    let class = Tensor::from_slice(&[1i64], &[1]).unwrap();
    let lse = (1f64.exp() + 2f64.exp() + 0.5f64.exp()).ln();
    let ce = LossOptions::new(LossKind::CrossEntropy).compute(&logits, &class).unwrap();
    assert!(close(ce.item().unwrap(), lse - 2.0));
    assert!(LossOptions::new(LossKind::CrossEntropy).compute(&logits, &zeros).is_err());
}

#[test]
fn metric_and_schedulers() {
    let mut m = Metric::new(MetricReduce::Mean).unwrap();
    m.update(1.0, 2).unwrap();
    m.update(4.0, 1).unwrap();
    assert!(close(m.compute(None).unwrap(), 2.0));
    m.reset().unwrap();
    let mut top = Metric::new(MetricReduce::Max).unwrap();
    for v in [1.0, 5.0, 2.0] {
        top.update(v, 1).unwrap();
    }
    assert_eq!(top.compute(None).unwrap(), 5.0);

    let w = leaf(&[0.0, 0.0]);
    let mut module = Module::from_tensors(&[("w", &w)], 0).unwrap();
    let mut opt = Optimizer::with_groups(
        &mut module,
        OptimizerKind::Sgd { lr: 1.0, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false },
        &[],
    )
    .unwrap();
    let mut warm = LrScheduler::defaults(ddp::DDP_LR_LINEAR);
    warm.start_factor = 0.1;
    warm.total_iters = 3;
    let mut cos = LrScheduler::defaults(ddp::DDP_LR_COSINE_ANNEALING);
    cos.t_max = 5;
    let parts = vec![LrScheduler::new(&mut opt, &warm).unwrap(), LrScheduler::new(&mut opt, &cos).unwrap()];
    let mut seq = LrScheduler::sequential(&mut opt, parts, &[3]).unwrap();
    assert!(close(seq.last_lr().unwrap(), 0.1));
    seq.step().unwrap();
    assert!(close(seq.last_lr().unwrap(), 0.4)); // LinearLR: 0.1 + 0.3 per step
    let again = vec![LrScheduler::new(&mut opt, &warm).unwrap()];
    assert!(LrScheduler::sequential(&mut opt, again, &[3]).is_err()); // one milestone fewer than schedulers
}

#[test]
fn strategy_and_group_on_a_world_of_one() {
    let _one = ONE_STRATEGY.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("OMP_NUM_THREADS", "1");
    let mut s = Strategy::new(1).unwrap();
    s.setup_environment().unwrap();
    assert_eq!((s.world_size(), s.local_rank(), s.node_rank(), s.devices()), (1, 0, 0, 1));
    assert_eq!(s.precision(), "32-true");

    // Parameter groups stepped through the strategy around the caller's own forward.
    let w = leaf(&[1.0, 2.0]);
    let b = leaf(&[0.0]);
    let mut module = Module::from_tensors(&[("net.weight", &w), ("net.bias", &b)], 0).unwrap();
    assert_eq!(module.state_names().unwrap(), vec![("net.weight".to_string(), true), ("net.bias".to_string(), true)]);
    s.setup_module(&mut module).unwrap();
    let sgd = OptimizerKind::Sgd { lr: 0.1, momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false };
    let bias_group = ParamGroup { patterns: vec!["*.bias".into()], lr: Some(0.5), ..Default::default() };
    let mut opt = Optimizer::with_groups(&mut module, sgd, &[bias_group, ParamGroup::default()]).unwrap();
    assert_eq!((opt.num_groups(), opt.group_lr(0).unwrap(), opt.group_lr(1).unwrap()), (2, 0.5, 0.1));
    let x = Tensor::from_slice(&[3.0f32, 4.0], &[2]).unwrap();
    s.forward_begin(&mut module).unwrap();
    let out = (&(&w * &x).unwrap().sum(&[], false).unwrap() + &b.sum(&[], false).unwrap()).unwrap();
    s.forward_end().unwrap();
    assert!(close(out.item().unwrap(), 11.0));
    s.backward(&out).unwrap();
    assert!(s.optimizer_step(&mut opt).unwrap());
    assert_eq!(w.to_vec::<f32>().unwrap(), vec![1.0 - 0.1 * 3.0, 2.0 - 0.1 * 4.0]);
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![-0.5]);
    assert!(module.call(None, &[&x], &[]).is_err()); // a model of tensors has no forward of its own
    let bad = ParamGroup { patterns: vec!["nothing.*".into()], ..Default::default() };
    let e = Optimizer::with_groups(&mut module, sgd, &[bad]).err().unwrap();
    assert!(e.message.contains("nothing.*"), "{}", e.message);

    // The collectives of the strategy and a metric with sync_dist.
    let mut x = leaf(&[1.0, 2.0]);
    let g = s.all_gather(&x, true).unwrap();
    assert_eq!(g.shape(), vec![1, 2]);
    g.sum(&[], false).unwrap().backward().unwrap();
    assert_eq!(x.grad().unwrap().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
    assert_eq!(s.broadcast_bytes(b"hi", 0).unwrap(), b"hi".to_vec());
    let parts = s.all_gather_uneven(&x).unwrap();
    assert_eq!(parts.len(), 1);
    assert!(s.reduce_boolean_decision(true, true).unwrap());
    s.reduce_tensor(&mut x, ReduceOp::Sum, None).unwrap();
    let mut metric = Metric::new(MetricReduce::Sum).unwrap();
    metric.update(2.5, 1).unwrap();
    assert_eq!(metric.compute(Some(&mut s)).unwrap(), 2.5);
    let sub = s.with_group(|g| g.new_subgroups(1)).unwrap().unwrap();
    s.reduce_tensor(&mut x, ReduceOp::Sum, Some(&sub)).unwrap();
    drop(sub);

    // The caller's own optimizer step, and its error coming back as it is.
    let mut ran = 0;
    assert!(s.optimizer_step_fn(&mut || { ran += 1; Ok(()) }).unwrap());
    assert_eq!(ran, 1);
    let refused = ddp::Error { status: ddp::sys::DDP_E_IO, message: "my optimizer refused".into() };
    let e = s.optimizer_step_fn(&mut || Err(refused.clone())).err().unwrap();
    assert_eq!(e, refused);
    let e = s.optimizer_step_fn(&mut || panic!("in the step")).err().unwrap();
    assert_eq!(e.status, ddp::sys::DDP_E_INTERNAL);
    assert_eq!((s.root_device(), s.precision_warning(), s.sync_batchnorm_layers()), ((false, 0), String::new(), 0));

    // Two modules in one checkpoint, back into fresh ones.
    let path = std::env::temp_dir().join(format!("ddp_rust_two_{}.ckpt", std::process::id()));
    let path = path.to_str().unwrap();
    let (gw, dw) = (Tensor::from_slice(&[1.5f32, 2.5], &[2]).unwrap(), Tensor::from_slice(&[7.0f32], &[1]).unwrap());
    let (generator, discriminator) =
        (Module::from_tensors(&[("w", &gw)], 0).unwrap(), Module::from_tensors(&[("w", &dw)], 0).unwrap());
    let info = ddp::CheckpointInfo { step: 12, epoch: 3, ..Default::default() };
    s.save_checkpoint_modules(path, &[("generator.", &generator), ("discriminator.", &discriminator)], &[], &[], &info)
        .unwrap();
    let (g2, d2) = (Tensor::from_slice(&[0.0f32; 2], &[2]).unwrap(), Tensor::from_slice(&[0.0f32], &[1]).unwrap());
    let (mut fresh_g, mut fresh_d) =
        (Module::from_tensors(&[("w", &g2)], 0).unwrap(), Module::from_tensors(&[("w", &d2)], 0).unwrap());
    let back = s
        .load_checkpoint_modules(path, &mut [("generator.", &mut fresh_g), ("discriminator.", &mut fresh_d)], &mut [],
                                 &mut [])
        .unwrap();
    assert_eq!((back.step, back.epoch), (12, 3));
    assert_eq!((g2.to_vec::<f32>().unwrap(), d2.to_vec::<f32>().unwrap()), (vec![1.5, 2.5], vec![7.0]));
    s.remove_checkpoint(path).unwrap();
    assert!(!std::path::Path::new(path).exists());
    s.teardown().unwrap();

    // A group of its own: its state and collectives.
    let group = Group::new(0, 1, "127.0.0.1", 0).unwrap();
    assert_eq!(group.backend(), "shm");
    group.set_timeout(1234).unwrap();
    assert_eq!(group.timeout_ms(), 1234);
    assert!(group.set_timeout(0).is_err());
    group.set_debug_detail(true).unwrap();
    assert!(group.debug_detail() && !group.is_broken());
    let mut data = [1.0f32, 2.0];
    assert_eq!(group.all_gather(&mut data).unwrap(), vec![1.0, 2.0]);
    group.reduce(&mut data, 0, ReduceOp::Max).unwrap();
    let options = ddp::ReducerOptions { bucket_cap_mb: 1.0, first_bucket_mb: 1.0, ..Default::default() };
    let reducer = ddp::Reducer::with_options(&group, vec![vec![0f32; 10], vec![0f32; 10], vec![0f32; 300_000]], &options)
        .unwrap();
    // Reverse order: the 1.2 MB gradient fills the first bucket, the small ones share the second.
    assert_eq!((reducer.bucket_indices(0).unwrap(), reducer.bucket_indices(1).unwrap()), (vec![2], vec![1, 0]));
    assert!(reducer.bucket_indices(2).is_err());
    assert_eq!(Tensor::from_slice(&[0f64; 3], &[3]).unwrap().nbytes(), 24);
    let mut w = group.broadcast_bytes_async(b"abc", 0).unwrap();
    w.wait(-1).unwrap();
    assert_eq!(w.result_bytes().unwrap(), b"abc".to_vec());
    let mut d = group.reduce_boolean_decision_async(false, false).unwrap();
    d.wait(-1).unwrap();
    assert!(!d.result_decision().unwrap());
    {
        let mut w = group.all_gather_uneven_async(&mut data).unwrap();
        w.wait(-1).unwrap();
        assert_eq!((w.result_count(), w.result_tensor(0).unwrap().numel()), (1, 2));
    }
    group.barrier_async().unwrap().wait(-1).unwrap();

    let env = ddp::Env::from_vars(&["RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                                    "MASTER_ADDR=h", "MASTER_PORT=1"], Some("torchelastic")).unwrap();
    assert_eq!((env.rank(), env.world_size(), env.node_rank()), (3, 4, 1));
    assert!(ddp::Env::from_name("no-such-cluster").is_err());
    assert_eq!(ddp::version_number() / 10000, ddp::version_string().split('.').next().unwrap().parse::<u32>().unwrap());
    assert_eq!(ddp::dtype_info(ddp::sys::DDP_BFLOAT16), ("bfloat16".to_string(), 2));
}

/// Lightning's CheckpointIO in a map, recording its calls.
#[derive(Default)]
struct MemoryIo {
    files: std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>,
    calls: std::sync::Mutex<Vec<String>>,
}

impl ddp::CheckpointIo for MemoryIo {
    fn save(&self, path: &str, data: &[u8]) -> ddp::Result<()> {
        self.calls.lock().unwrap().push(format!("save {path}"));
        self.files.lock().unwrap().insert(path.into(), data.to_vec());
        Ok(())
    }
    fn load(&self, path: &str) -> ddp::Result<Vec<u8>> {
        self.calls.lock().unwrap().push(format!("load {path}"));
        self.files.lock().unwrap().get(path).cloned().ok_or(ddp::Error { status: ddp::sys::DDP_E_IO, message: "no such key".into() })
    }
    fn remove(&self, path: &str) -> ddp::Result<()> {
        self.calls.lock().unwrap().push(format!("remove {path}"));
        self.files.lock().unwrap().remove(path);
        Ok(())
    }
}

/// A job of one process on a free port; `panic_in_rank` makes global_rank panic.
struct OneProcess {
    port: i32,
    panic_in_rank: bool,
}

impl ddp::ClusterEnvironment for OneProcess {
    fn world_size(&self) -> i32 { 1 }
    fn global_rank(&self) -> i32 {
        assert!(!self.panic_in_rank, "no rank here");
        0
    }
    fn local_rank(&self) -> i32 { 0 }
    fn local_world_size(&self) -> i32 { 1 }
    fn node_rank(&self) -> i32 { 0 }
    fn main_address(&self) -> String { "127.0.0.1".into() }
    fn main_port(&self) -> i32 { self.port }
}

fn free_port() -> i32 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port() as i32
}

#[test]
fn checkpoint_io_and_cluster_environment_written_in_rust() {
    let _one = ONE_STRATEGY.lock().unwrap_or_else(|p| p.into_inner());
    std::env::set_var("OMP_NUM_THREADS", "1");
    let io = std::sync::Arc::new(MemoryIo::default());
    let options = ddp::StrategyOptions {
        devices: 1,
        checkpoint_io: Some(io.clone()),
        cluster_environment: Some(std::sync::Arc::new(OneProcess { port: free_port(), panic_in_rank: false })),
        ..Default::default()
    };
    let mut s = Strategy::with_options(&options).unwrap();
    drop(options); // the strategy keeps its own references
    s.setup_environment().unwrap();
    let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]).unwrap();
    let m = Module::from_tensors(&[("w", &w)], 0).unwrap();
    let info = ddp::CheckpointInfo { step: 4, ..Default::default() };
    s.save_checkpoint_modules("mem://a.ckpt", &[("", &m)], &[], &[], &info).unwrap();
    let saved = io.files.lock().unwrap().get("mem://a.ckpt").cloned().unwrap();
    assert!(saved.starts_with(b"PK"), "a torch.save zip archive"); // what torch.load opens
    let back_w = Tensor::from_slice(&[0.0f32; 3], &[3]).unwrap();
    let mut back = Module::from_tensors(&[("w", &back_w)], 0).unwrap();
    assert_eq!(s.load_checkpoint_modules("mem://a.ckpt", &mut [("", &mut back)], &mut [], &mut []).unwrap().step, 4);
    assert_eq!(back_w.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    s.remove_checkpoint("mem://a.ckpt").unwrap();
    assert_eq!(*io.calls.lock().unwrap(), vec!["save mem://a.ckpt", "load mem://a.ckpt", "remove mem://a.ckpt"]);
    let e = s.load_checkpoint_modules("mem://a.ckpt", &mut [("", &mut back)], &mut [], &mut []).err().unwrap();
    assert_eq!(e.status, ddp::sys::DDP_E_IO);
    assert!(e.message.contains("mem://a.ckpt"), "{}", e.message);
    s.teardown().unwrap();

    // A panicking environment method fails setup with a status; nothing unwinds through C.
    let broken = ddp::StrategyOptions {
        devices: 1,
        cluster_environment: Some(std::sync::Arc::new(OneProcess { port: free_port(), panic_in_rank: true })),
        ..Default::default()
    };
    let mut s = Strategy::with_options(&broken).unwrap();
    let e = s.setup_environment().err().unwrap();
    assert_eq!(e.status, ddp::sys::DDP_E_INVALID_ARGUMENT);
    assert!(e.message.contains("global_rank"), "{}", e.message);
}
