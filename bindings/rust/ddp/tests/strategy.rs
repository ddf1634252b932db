//! The strategy from Rust: this test is local rank 0 of two; setting up the
//! environment starts the program again for rank 1 (Lightning's popen), which
//! runs this same test. Both train the digits MLP that
//! examples/digits/export_digits.py writes (via DDP_EXPORT_DIGITS, set by
//! CTest: "<python> <export_digits.py>"); without it the test says skipped.
use std::path::PathBuf;
use std::process::Command;

use ddp::{Module, Optimizer, ReduceOp, Strategy};

fn read<T: Copy + Default>(path: &PathBuf) -> Vec<T> {
    let bytes = std::fs::read(path).unwrap();
    let n = bytes.len() / std::mem::size_of::<T>();
    let mut v = vec![T::default(); n];
    // SAFETY: plain little-endian numbers, as export_digits.py writes them.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr() as *mut u8, n * std::mem::size_of::<T>()) };
    v
}

#[test]
fn two_ranks_train_the_digits_mlp_through_the_strategy() {
    // Rank 1 inherits the data directory rank 0 made.
    let dir = match std::env::var("DDP_RUST_DIGITS_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => {
            let Ok(export) = std::env::var("DDP_EXPORT_DIGITS") else {
                println!("skipped: DDP_EXPORT_DIGITS is not set (CTest sets it)");
                return;
            };
            let dir = std::env::temp_dir().join(format!("ddp_rust_digits_{}", std::process::id()));
            let ok = Command::new("sh").arg("-c").arg(format!("{export} {}", dir.display())).status().unwrap();
            if !ok.success() {
                println!("skipped: export_digits.py could not run (scikit-learn missing?)");
                return;
            }
            std::env::set_var("DDP_RUST_DIGITS_DIR", &dir);
            dir
        }
    };
    std::env::set_var("OMP_NUM_THREADS", "1");
    let mut s = Strategy::new(2).expect("strategy");
    s.setup_environment().expect("setup_environment");
    assert_eq!(s.world_size(), 2);
    let rank = s.global_rank();
    let mut m = Module::load(dir.join("mlp.pt").to_str().unwrap()).expect("module");
    assert_eq!(m.num_parameters(), 6);
    assert!(Module::load("/nonexistent.pt").is_err());
    s.setup_module(&mut m).expect("setup_module");
    let mut opt = Optimizer::sgd(&mut m, 0.05, 0.9).expect("optimizer");

    let x: Vec<f32> = read(&dir.join("train_x.f32"));
    let y: Vec<i64> = read(&dir.join("train_y.i64"));
    let mut losses = Vec::new();
    for step in 0..80usize {
        // This rank's batch of 32: rows (2 * step + rank) * 32 ..
        let first = ((2 * step + rank as usize) * 32) % (y.len() - 32);
        let mut bx = x[first * 64..(first + 32) * 64].to_vec();
        let mut by = y[first..first + 32].to_vec();
        losses.push(s.train_step(&mut m, &mut opt, &mut bx, &mut by).expect("train_step"));
    }
    let early: f32 = losses[..5].iter().sum::<f32>() / 5.0;
    let late: f32 = losses[75..].iter().sum::<f32>() / 5.0;
    assert!(late < early * 0.5, "rank {rank}: the loss went from {early} to {late}");
    let mut mean = [late];
    s.reduce(&mut mean, ReduceOp::Mean).unwrap();
    assert!(mean[0] < early, "mean late loss {}", mean[0]);

    let ckpt = dir.join("rust.ckpt");
    s.save_checkpoint(ckpt.to_str().unwrap(), &m, &opt, 80, 0).expect("save");
    assert_eq!(s.load_checkpoint(ckpt.to_str().unwrap(), &mut m, &mut opt).expect("load"), (80, 0));
    // A checkpoint directory: nothing to resume from at first, then the newest of the kept ones.
    let ckpts = dir.join("ckpts");
    let ckpts = ckpts.to_str().unwrap();
    assert!(s.resume_from_dir(ckpts, &mut m, &mut opt).expect("resume from nothing").is_none());
    for step in [40, 80] {
        let info = ddp::CheckpointInfo { step, epoch: step / 40, batches_in_epoch: 40, ..Default::default() };
        s.save_checkpoint_to_dir(ckpts, 1, &m, &opt, &info).expect("save to dir");
    }
    let (info, world, report) = s.resume_from_dir(ckpts, &mut m, &mut opt).expect("resume").expect("a checkpoint");
    assert_eq!((info.step, info.epoch, world), (80, 2, 2), "{report}");
    assert!(report.contains("-step=80.ckpt"), "{report}");
    s.barrier("end").unwrap();
    s.teardown().expect("teardown: rank 1 must end well");
    if rank == 0 {
        let _ = std::fs::remove_dir_all(&dir);
    }
}
