//! The 2-rank all-reduce and a gradient-sync step from Rust:
//!     PKG_CONFIG_PATH=$PWD/build cargo build --offline --manifest-path bindings/rust/Cargo.toml \
//!         --example allreduce_and_grad_sync
//!     build/tools/ddprun --standalone --nproc-per-node 2 \
//!         bindings/rust/target/debug/examples/allreduce_and_grad_sync
use ddp::{CommHook, Group, ReduceOp, Reducer};

fn main() -> Result<(), ddp::Error> {
    let group = Group::from_env()?; // the environment ddprun/torchrun/SLURM gives
    let rank = group.rank();
    let mut x = vec![rank as f32, rank as f32 + 1.0, rank as f32 + 2.0];
    group.all_reduce(&mut x, ReduceOp::Sum)?;
    println!("[rank {rank}] all_reduce SUM: {x:?}");

    // Gradients in Vecs the reducer owns: write, mark ready (last layer first), finish.
    let mut reducer = Reducer::new(&group, vec![vec![0.0; 12], vec![0.0; 4]], 25.0)?;
    let hook = CommHook::fp16_compress()?;
    reducer.set_comm_hook(&hook)?;
    for (i, v) in reducer.gradient_mut(1).iter_mut().enumerate() {
        *v = (rank + i as i32) as f32;
    }
    reducer.mark_ready(1)?;
    for (i, v) in reducer.gradient_mut(0).iter_mut().enumerate() {
        *v = (10 * rank + i as i32) as f32;
    }
    reducer.mark_ready(0)?;
    reducer.finish()?;
    println!("[rank {rank}] averaged bias grad: {:?}", reducer.gradient(1));
    Ok(())
}
