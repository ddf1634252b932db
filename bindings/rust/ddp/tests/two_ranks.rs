//! Two real ranks: this test binary starts itself twice as workers (the
//! ignored `worker` test) with the Lightning environment, and each checks
//! the collectives and a reducer step over its own Vec<f32> gradients.
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ddp::{CommHook, Group, ModelAverager, ReduceOp, Reducer};

#[test]
fn two_ranks_collectives_and_a_reducer_step() {
    let exe = std::env::current_exe().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut children: Vec<_> = (0..2)
        .map(|rank| {
            Command::new(&exe)
                .args(["worker", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
                .env("DDP_RUST_WORKER", "1")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .env("WORLD_SIZE", "2")
                .env("RANK", rank.to_string())
                .env("OMP_NUM_THREADS", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while children.iter_mut().any(|c| c.try_wait().unwrap().is_none()) {
        if Instant::now() > deadline {
            for c in children.iter_mut() {
                let _ = c.kill();
            }
            panic!("the workers did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for (rank, c) in children.into_iter().enumerate() {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "rank {rank}:\n{text}");
        assert!(text.contains(&format!("worker rank {rank} ok")), "rank {rank}:\n{text}");
    }
}

#[test]
#[ignore = "one rank of two_ranks_collectives_and_a_reducer_step"]
fn worker() {
    if std::env::var("DDP_RUST_WORKER").is_err() {
        return;
    }
    let group = Group::from_env().expect("group");
    let (rank, world) = (group.rank(), group.size());
    assert_eq!(world, 2);

    let mut x = vec![rank as f32, rank as f32 + 1.0, rank as f32 + 2.0];
    group.all_reduce(&mut x, ReduceOp::Sum).unwrap();
    assert_eq!(x, vec![1.0, 3.0, 5.0]);
    let mut m = vec![rank as f64 * 2.0];
    group.all_reduce(&mut m, ReduceOp::Mean).unwrap();
    assert_eq!(m, vec![1.0]);

    let parts = group.all_gather_uneven(&vec![rank as i64; rank as usize + 1]).unwrap();
    assert_eq!(parts, vec![vec![0i64], vec![1i64, 1]]);
    let (mut mine, mut both) = (vec![rank as i32 + 5; 2], vec![0i32; 4]);
    group.all_gather_into(&mut mine, &mut both).unwrap();
    assert_eq!(both, vec![5, 5, 6, 6]);
    let mut again = vec![0i32; 4];
    group.all_gather_into_async(&mut mine, &mut again).unwrap().wait(-1).unwrap();
    assert_eq!(again, both);
    assert!(group.all_gather_into(&mut mine, &mut vec![0i32; 3]).is_err(), "3 elements are not 2 ranks x 2");
    let bytes = group.broadcast_bytes(if rank == 0 { b"from rank 0" } else { b"" }, 0).unwrap();
    assert_eq!(bytes, b"from rank 0");
    assert!(group.reduce_boolean_decision(rank == 0, false).unwrap());
    assert!(!group.reduce_boolean_decision(rank == 0, true).unwrap());

    // A reducer step over this rank's own Vec<f32> gradients: the average.
    let grads = vec![vec![0.0f32; 6], vec![0.0f32; 3]];
    let mut reducer = Reducer::new(&group, grads, 25.0).unwrap();
    let hook = CommHook::fp16_compress().unwrap();
    reducer.set_comm_hook(&hook).unwrap();
    for step in 0..2 {
        for i in (0..2).rev() {
            for (k, v) in reducer.gradient_mut(i).iter_mut().enumerate() {
                *v = (rank * 2 + step) as f32 + k as f32;
            }
            reducer.mark_ready(i).unwrap();
        }
        reducer.finish().unwrap();
        for i in 0..2 {
            let want: Vec<f32> = (0..reducer.gradient(i).len()).map(|k| (1 + step) as f32 + k as f32).collect();
            assert_eq!(reducer.gradient(i), &want[..], "step {step} gradient {i}");
        }
    }

    // no_sync: gradients stay local.
    reducer.set_sync(false).unwrap();
    reducer.gradient_mut(1)[0] = rank as f32;
    reducer.mark_ready(1).unwrap();
    reducer.mark_ready(0).unwrap();
    reducer.finish().unwrap();
    assert_eq!(reducer.gradient(1)[0], rank as f32);
    reducer.set_sync(true).unwrap();

    // Post-local SGD in subgroups of one rank, and the model averager every 2 steps.
    let sub = group.new_subgroups(1).unwrap();
    let local = CommHook::post_localsgd(Some(&sub), 0, true).unwrap();
    let mut local_reducer = Reducer::new(&group, vec![vec![0.0f32; 4]], 25.0).unwrap();
    local_reducer.set_comm_hook(&local).unwrap();
    local_reducer.gradient_mut(0).fill(rank as f32);
    local_reducer.mark_ready(0).unwrap();
    local_reducer.finish().unwrap();
    assert_eq!(local_reducer.gradient(0), &[rank as f32; 4][..], "subgroups of one: nothing averaged");
    let mut averager = ModelAverager::new(&group, 2, 0).unwrap();
    let mut param = vec![rank as f32 * 4.0; 3];
    averager.step(&mut [&mut param[..]]).unwrap(); // step 0: averaged
    assert_eq!(param, vec![2.0; 3]);
    param.fill(rank as f32);
    averager.step(&mut [&mut param[..]]).unwrap(); // step 1: left alone
    assert_eq!(param, vec![rank as f32; 3]);

    // Errors carry the status and the message.
    let err = group.broadcast(&mut [0f32; 2], world).unwrap_err();
    assert_eq!(err.status, ddp::sys::DDP_E_INVALID_ARGUMENT);
    assert!(err.message.contains("src"), "{err}");
    println!("worker rank {rank} ok");
}

#[test]
fn powersgd_options_are_checked() {
    let mut o = CommHook::powersgd_defaults();
    assert_eq!((o.matrix_approximation_rank, o.start_powersgd_iter, o.use_error_feedback), (1, 1000, 1));
    o.start_powersgd_iter = 1;
    let err = CommHook::powersgd(&o).err().expect("start 1 with error feedback is refused");
    assert_eq!(err.status, ddp::sys::DDP_E_INVALID_ARGUMENT);
    assert!(err.message.contains("start_powersgd_iter"), "{err}");
    let hook = CommHook::powersgd(&CommHook::powersgd_defaults()).unwrap();
    assert_eq!(hook.compression_stats().unwrap(), (0, 0, 0));
    let wrapped = CommHook::wrap_fp16(&hook).unwrap();
    assert!(wrapped.compression_stats().is_ok());
    assert!(CommHook::noop().unwrap().compression_stats().is_err());
}
