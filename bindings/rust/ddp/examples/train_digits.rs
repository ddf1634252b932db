//! The main job from Rust: the digits MLP trained through libddp's strategy,
//! the same calls in the same order as examples/c/train_digits.c, so each
//! step's loss is the C job's to the bit (tests/bindings/
//! test_digits_every_language.sh checks it).
//!
//! ```text
//! .venv/bin/python examples/digits/export_digits.py build/digits
//! PKG_CONFIG_PATH=$PWD/build cargo build --release --example train_digits \
//!     --manifest-path bindings/rust/Cargo.toml
//! build/tools/ddprun --standalone --nproc-per-node 2 bindings/rust/target/release/examples/train_digits build/digits
//! ```
//!
//! Without a launcher, `--world N` lets the strategy start the other ranks
//! (it runs this program again). DIGITS_STEP_LOG=FILE: rank 0 writes each
//! step's loss there.
use std::io::Write;
use std::path::Path;
use std::time::Instant;

const FEATURES: usize = 64;
const CLASSES: usize = 10;
const BATCH: usize = 32;

fn read_f32(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e} (run export_digits.py first)", path.display()));
    bytes.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect()
}

fn read_i64(path: &Path) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e} (run export_digits.py first)", path.display()));
    bytes.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect()
}

/// Correct predictions (the first of equal maxima, as the C job's strict `>`).
fn count_correct(logits: &[f32], labels: &[i64]) -> usize {
    logits
        .chunks_exact(CLASSES)
        .zip(labels)
        .filter(|(row, &label)| {
            let best = (1..CLASSES).fold(0, |best, c| if row[c] > row[best] { c } else { best });
            best as i64 == label
        })
        .count()
}

fn main() -> Result<(), ddp::Error> {
    let started = Instant::now();
    let args: Vec<String> = std::env::args().collect();
    let dir = Path::new(args.get(1).map(String::as_str).unwrap_or_else(|| {
        eprintln!("usage: train_digits DATA_DIR [--world N] [--epochs E]");
        std::process::exit(2)
    }));
    let (mut world, mut epochs) = (0i32, 20i64);
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().and_then(|v| v.parse::<i64>().ok());
        match (flag.as_str(), value) {
            ("--world", Some(v)) => world = v as i32,
            ("--epochs", Some(v)) => epochs = v,
            _ => {
                eprintln!("train_digits: unknown argument {flag}");
                std::process::exit(2)
            }
        }
    }
    let (train_x, train_y) = (read_f32(&dir.join("train_x.f32")), read_i64(&dir.join("train_y.i64")));
    let (mut test_x, test_y) = (read_f32(&dir.join("test_x.f32")), read_i64(&dir.join("test_y.i64")));

    let options = ddp::StrategyOptions { devices: world, state_dict_prefix: Some("net.".into()), ..Default::default() };
    let mut s = ddp::Strategy::with_options(&options)?;
    s.setup_environment()?;
    let (rank, world) = (s.global_rank(), s.world_size());
    let mut m = ddp::Module::load(dir.join("mlp.pt").to_str().expect("a UTF-8 path"))?;
    s.setup_module(&mut m)?;
    let mut opt = ddp::Optimizer::sgd(&mut m, 0.05, 0.9)?;
    let n = train_y.len() as i64;
    let per_rank = ddp::sampler_num_samples(n, world, false)?;
    let batches = (per_rank + BATCH as i64 - 1) / BATCH as i64;
    let mut step_log = match std::env::var("DIGITS_STEP_LOG") {
        Ok(path) if rank == 0 => Some(std::fs::File::create(path).expect("the step log cannot be written")),
        _ => None,
    };
    let mut steps = 0i64;
    for epoch in 0..epochs {
        let t0 = Instant::now();
        let order = ddp::sampler_indices(n, world, rank, epoch, &ddp::SamplerOptions::default())?;
        let mut sums = [0f64; 3]; // loss x samples, correct, samples
        for batch in order.chunks(BATCH) {
            let mut bx: Vec<f32> = batch.iter().flat_map(|&k| &train_x[k as usize * FEATURES..][..FEATURES]).copied().collect();
            let mut by: Vec<i64> = batch.iter().map(|&k| train_y[k as usize]).collect();
            let (loss, logits) = s.train_step_logits(&mut m, &mut opt, &mut bx, &mut by)?;
            steps += 1;
            if let Some(log) = step_log.as_mut() {
                // Rust's shortest round-trip form: the same f32 as C's %.9g.
                writeln!(log, "{loss:?}").expect("the step log cannot be written");
            }
            sums[0] += loss as f64 * batch.len() as f64;
            sums[1] += count_correct(&logits, &by) as f64;
            sums[2] += batch.len() as f64;
        }
        s.reduce(&mut sums, ddp::ReduceOp::Sum)?; // Lightning's sync_dist
        let seconds = t0.elapsed().as_secs_f64();
        if rank == 0 {
            println!(
                "epoch {:2}  loss {:.4}  accuracy {:.4}  {:.0} samples/s  ({:.0} ms)",
                epoch + 1,
                sums[0] / sums[2],
                sums[1] / sums[2],
                sums[2] / seconds,
                seconds * 1000.0
            );
        }
        let info = ddp::CheckpointInfo { step: steps, epoch: epoch + 1, batches_in_epoch: batches, ..Default::default() };
        s.save_checkpoint_info(dir.join("last.ckpt").to_str().expect("a UTF-8 path"), &m, &opt, &info)?;
    }
    m.train(false)?;
    let logits = m.forward(&mut test_x, test_y.len())?;
    let correct = count_correct(&logits, &test_y);
    s.teardown()?;
    if rank == 0 {
        println!(
            "held-out accuracy {:.4} ({} of {}), {} processes, {:.2} s from launch to result",
            correct as f64 / test_y.len() as f64,
            correct,
            test_y.len(),
            world,
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
