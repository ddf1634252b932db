//! Rust's side of bench/run_binding_cost.sh: the calls of
//! bench/bench_binding_cost.c through the safe crate, on 2 ranks under ddprun.
use std::time::Instant;

const GRADS: usize = 4;
const GRAD_LEN: usize = 256;
const CALLS: usize = 2000;
const BLOCKS: usize = 7;
const WARMUP: usize = 200;

fn median_us(g: &ddp::Group, mut f: impl FnMut()) -> f64 {
    (0..WARMUP).for_each(|_| f());
    let mut per: Vec<f64> = (0..BLOCKS)
        .map(|_| {
            g.barrier().expect("barrier");
            let t0 = Instant::now();
            (0..CALLS).for_each(|_| f());
            t0.elapsed().as_secs_f64() * 1e6 / CALLS as f64
        })
        .collect();
    per.sort_by(|a, b| a.partial_cmp(b).unwrap());
    per[BLOCKS / 2]
}

fn main() -> Result<(), ddp::Error> {
    let g = ddp::Group::from_env()?;
    // The tensor made once, as the C, Python and Java programs make theirs.
    let mut one = [1f32];
    let mut view = ddp::View::new(&mut one)?;
    let ar = median_us(&g, || g.all_reduce_view(&mut view, ddp::ReduceOp::Sum).expect("all_reduce"));
    let mut r = ddp::Reducer::new(&g, vec![vec![0f32; GRAD_LEN]; GRADS], 25.0)?;
    let st = median_us(&g, || {
        for i in (0..GRADS).rev() {
            r.mark_ready(i).expect("mark_ready");
        }
        r.finish().expect("finish");
    });
    if g.rank() == 0 {
        println!("{{\"lang\": \"rust\", \"allreduce_us\": {ar:.3}, \"reducer_step_us\": {st:.3}}}");
    }
    Ok(())
}
