//! spawn from Rust (popen: each worker is this test binary started again,
//! reaching the same spawn call), comm hooks written as Rust closures, and
//! the reducer over f64, F16 and BF16 gradients. The only test here, so a
//! worker's run of the binary runs nothing else.
use ddp::{CommHook, Group, ReduceOp, Reducer, StartMethod, Worker, BF16, F16};

/// The allreduce hook's algorithm as a closure: sum over the group, divide.
fn averaging_hook() -> CommHook<'static> {
    CommHook::custom(|group: &Group, bucket: &mut ddp::Bucket<'_>| {
        let divisor = bucket.divisor() as f64;
        let data = bucket.buffer_mut::<f64>()?;
        group.all_reduce(data, ReduceOp::Sum)?;
        data.iter_mut().for_each(|v| *v /= divisor);
        Ok(())
    })
    .expect("custom hook")
}

fn worker(w: &Worker, arg: &[u8]) -> i32 {
    assert_eq!(arg, b"job");
    let group = Group::from_env().expect("group");
    let rank = group.rank();
    let mut report = Vec::new();

    // f64 gradients through a Rust hook: the mean, and the bucket's layout.
    let mut r = Reducer::new(&group, vec![vec![rank as f64 + 1.0; 3], vec![10.0 * (rank as f64 + 1.0); 2]], 25.0)
        .expect("reducer");
    r.set_comm_hook(&averaging_hook()).expect("set hook"); // the hook value may go; the reducer keeps it
    r.mark_ready(1).unwrap();
    r.mark_ready(0).unwrap();
    r.finish().unwrap();
    report.push(format!("f64 {:?} {:?}", r.gradient(0), r.gradient(1)));

    // Half precision: bits in, the default all-reduce hook's mean out.
    let one = F16(0x3c00); // 1.0
    let mut half = Reducer::new(&group, vec![vec![one; 4]], 25.0).expect("f16 reducer");
    half.mark_ready(0).unwrap();
    half.finish().unwrap();
    let b = BF16(0x4000); // 2.0
    let mut bf = Reducer::new(&group, vec![vec![b; 4]], 25.0).expect("bf16 reducer");
    bf.mark_ready(0).unwrap();
    bf.finish().unwrap();
    report.push(format!("half {:?} {:?}", half.gradient(0)[0], bf.gradient(0)[0]));

    // Reducer options: unmarked gradients count as zeros.
    let opts = ddp::ReducerOptions { find_unused_parameters: true, bucket_cap_mb: 1.0, ..Default::default() };
    let mut unused = Reducer::with_options(&group, vec![vec![rank as f32; 2], vec![5.0f32 + rank as f32; 2]], &opts)
        .expect("reducer with options");
    unused.gradient_mut(0).iter_mut().for_each(|v| *v = 2.0 * (rank as f32 + 1.0));
    unused.mark_ready(0).unwrap();
    unused.finish().unwrap();
    report.push(format!("options {:?} {:?}", unused.gradient(0), unused.gradient(1)));

    // An all-reduce started, then waited on; the environment spawn gave.
    let mut started = vec![rank as f32 + 1.0; 2];
    let mut work = group.all_reduce_async(&mut started, ReduceOp::Sum).unwrap();
    work.wait(10_000).unwrap();
    drop(work);
    let mut twice = [rank as f64; 3];
    let mut view = ddp::View::new(&mut twice).unwrap();
    group.all_reduce_view(&mut view, ReduceOp::Sum).unwrap();
    group.all_reduce_view(&mut view, ReduceOp::Sum).unwrap();
    assert_eq!(view.as_slice(), &[2.0, 2.0, 2.0]); // (0 + 1) summed, then doubled
    let env = ddp::Env::detect().unwrap();
    report.push(format!("async {:?} env {} {} {}", started, env.rank() == rank, env.world_size(), env.local_rank() == rank));

    // A hook that fails on rank 1 fails the step on both ranks, naming why.
    let failing = CommHook::custom(|group: &Group, bucket: &mut ddp::Bucket<'_>| {
        if group.rank() == 1 {
            return Err(ddp::Error { status: ddp::sys::DDP_E_INVALID_ARGUMENT, message: "refused by the test".into() });
        }
        group.all_reduce(bucket.buffer_mut::<f32>()?, ReduceOp::Sum)
    })
    .unwrap();
    let mut r3 = Reducer::new(&group, vec![vec![1.0f32; 2]], 25.0).unwrap();
    r3.set_comm_hook(&failing).unwrap();
    let outcome = r3.mark_ready(0).and_then(|_| r3.finish());
    report.push(match outcome {
        Ok(()) => "failing hook: no error".into(),
        Err(e) => format!("failing hook: {} {}", e.status, e.message.contains("refused by the test")),
    });
    if rank == 0 {
        w.set_result(report.join("\n").as_bytes()).unwrap();
    } else if !report.iter().any(|l| l.starts_with("failing hook: -1 true")) {
        return 3; // rank 1's own report is checked through its exit code
    }
    0
}

#[test]
fn spawn_runs_rust_hooks_on_every_float_type() {
    std::env::set_var("OMP_NUM_THREADS", "1");
    let out = ddp::spawn(2, StartMethod::Popen, 120_000, worker, b"job").expect("spawn");
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "f64 [1.5, 1.5, 1.5] [15.0, 15.0]", "{text}");
    assert_eq!(lines[1], "half F16(15360) BF16(16384)", "{text}"); // (1 + 1) / 2 = 1.0, (2 + 2) / 2 = 2.0
    // (2 + 4) / 2; the unmarked one (5 and 6 before) is zeros.
    assert_eq!(lines[2], "options [3.0, 3.0] [0.0, 0.0]", "{text}");
    assert_eq!(lines[3], "async [3.0, 3.0] env true 2 true", "{text}");
    assert!(lines[4].starts_with("failing hook: ") && !lines[3].contains("no error"), "{text}");
}
