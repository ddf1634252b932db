"""The main job from Python: the digits MLP trained through libddp's
strategy, the same calls in the same order as examples/c/train_digits.c, so
each step's loss is the C job's to the bit (tests/bindings/
test_digits_every_language.sh checks it).

    .venv/bin/python examples/digits/export_digits.py build/digits
    PYTHONPATH=build/bindings/python build/tools/ddprun --standalone --nproc-per-node 2 \\
        .venv/bin/python examples/python/train_digits.py build/digits

Without a launcher, `--world N` lets the strategy start the other ranks
itself (it runs this script again). DIGITS_STEP_LOG=FILE: rank 0 writes
each step's loss there.
"""
import argparse
import os
import time

import numpy as np

import libddp

FEATURES, CLASSES = 64, 10


def load_split(data_dir, which):
    x = np.fromfile(os.path.join(data_dir, f"{which}_x.f32"), dtype=np.float32)
    y = np.fromfile(os.path.join(data_dir, f"{which}_y.i64"), dtype=np.int64)
    return x.reshape(len(y), FEATURES), y


def count_correct(logits, labels):
    # argmax keeps the first of equal maxima, as the C job's strict ">" does.
    return int((libddp.to_numpy(logits).reshape(-1, CLASSES).argmax(axis=1) == labels).sum())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir")
    p.add_argument("--world", type=int, default=0, help="processes on this node (0: the launcher's)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--ckpt", default=None, help="checkpoint written at each epoch's end (default DATA_DIR/last.ckpt)")
    a = p.parse_args()
    started = time.monotonic()
    train_x, train_y = load_split(a.data_dir, "train")
    test_x, test_y = load_split(a.data_dir, "test")

    with libddp.strategy(devices=a.world, state_dict_prefix="net.") as s:
        s.setup_environment()
        rank, world = s.global_rank(), s.world_size()
        with libddp.Module.load(os.path.join(a.data_dir, "mlp.pt")) as m:
            s.setup_module(m)
            opt = libddp.Optimizer.sgd(m, lr=0.05, momentum=0.9)
            per_rank = libddp.sampler_num_samples(len(train_y), world)
            batches = (per_rank + a.batch - 1) // a.batch
            log_path = os.environ.get("DIGITS_STEP_LOG")
            step_log = open(log_path, "w") if rank == 0 and log_path else None
            steps = 0
            for epoch in range(a.epochs):
                t0 = time.monotonic()
                order = libddp.sampler_order(len(train_y), world, rank, epoch)
                sums = np.zeros(3, np.float64)  # loss x samples, correct, samples
                for at in range(0, len(order), a.batch):
                    idx = order[at:at + a.batch]
                    bx, by = np.ascontiguousarray(train_x[idx]), np.ascontiguousarray(train_y[idx])
                    logits = s.forward(m, libddp.wrap(bx))
                    loss = libddp.cross_entropy_loss(logits, libddp.wrap(by))
                    opt.zero_grad()
                    s.backward(loss)
                    s.optimizer_step(opt)
                    steps += 1
                    value = float(libddp.to_numpy(loss))
                    if step_log:
                        step_log.write("%.9g\n" % value)
                    sums += (value * len(idx), count_correct(logits, by), len(idx))
                s.reduce(libddp.wrap(sums), libddp.SUM)  # Lightning's sync_dist
                seconds = time.monotonic() - t0
                if rank == 0:
                    print(f"epoch {epoch + 1:2d}  loss {sums[0] / sums[2]:.4f}  accuracy {sums[1] / sums[2]:.4f}  "
                          f"{sums[2] / seconds:.0f} samples/s  ({seconds * 1000:.0f} ms)", flush=True)
                with libddp.CheckpointInfo() as info:
                    info.step, info.epoch, info.batches_in_epoch = steps, epoch + 1, batches
                    s.save_checkpoint_with(a.ckpt or os.path.join(a.data_dir, "last.ckpt"), m, opt, None, info)
            if step_log:
                step_log.close()
            m.train(False)
            correct = count_correct(m.forward(libddp.wrap(test_x)), test_y)
            opt.close()
        s.teardown()
        if rank == 0:
            print(f"held-out accuracy {correct / len(test_y):.4f} ({correct} of {len(test_y)}), {world} processes, "
                  f"{time.monotonic() - started:.2f} s from launch to result")


if __name__ == "__main__":
    main()
