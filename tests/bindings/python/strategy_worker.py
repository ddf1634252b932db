"""DDPStrategy from Python through the SWIG binding: this script is rank 0
and the strategy starts rank 1 by running it again (Lightning's popen
launcher). Two epochs of a TorchScript MLP on `DistributedSampler`'s order;
rank 0 prints a JSON report (losses, outputs, checks) for
test_python_binding.py to compare with torch.
    strategy_worker.py <model.pt> <data.npz> <checkpoint path>"""
import json
import sys

import numpy as np

import libddp

BATCH, EPOCHS, WORLD = 8, 2, 2


def main(model_path, data_path, ckpt):
    data = np.load(data_path)
    x, y = data["x"], data["y"]
    checks = {}
    with libddp.Strategy(devices=WORLD, timeout_ms=60000) as s:
        s.setup_environment()
        rank = s.global_rank()
        checks["ranks"] = s.world_size() == WORLD and s.is_global_zero() == (rank == 0)
        m = libddp.Module.load(model_path)
        opt = libddp.Optimizer.sgd(m, lr=0.1, momentum=0.9)
        s.setup_module(m)
        losses = []
        for epoch in range(EPOCHS):
            order = libddp.to_numpy(libddp.sampler_indices(len(x), WORLD, rank, epoch, shuffle=True, seed=0))
            for b in range(len(order) // BATCH):
                idx = order[b * BATCH:(b + 1) * BATCH]
                xb, yb = np.ascontiguousarray(x[idx]), np.ascontiguousarray(y[idx])
                opt.zero_grad()
                out = s.forward(m, libddp.wrap(xb))
                loss = libddp.cross_entropy_loss(out, libddp.wrap(yb))
                s.backward(loss)
                s.optimizer_step(opt)
                losses.append(float(libddp.to_numpy(loss)))
        probe = libddp.to_numpy(m.forward(libddp.wrap(np.ascontiguousarray(x[:4]))))
        # Lightning's reduce (MEAN by default) of each rank's last loss.
        last = np.array([losses[-1]], np.float32)
        s.reduce(libddp.wrap(last))
        everyone = libddp.to_numpy(s.all_gather(libddp.wrap(np.array([losses[-1]], np.float32))))
        checks["reduce_mean"] = bool(np.isclose(last[0], everyone.mean(), rtol=1e-6))
        # A checkpoint round trip: step and epoch come back, the weights too.
        s.save_checkpoint(ckpt, m, opt, len(losses), EPOCHS)
        fresh = libddp.Module.load(model_path)
        step, epoch = s.load_checkpoint(ckpt, fresh, None)
        again = libddp.to_numpy(fresh.forward(libddp.wrap(np.ascontiguousarray(x[:4]))))
        checks["checkpoint"] = (step, epoch) == (len(losses), EPOCHS) and bool(np.array_equal(again, probe))
        s.barrier("done")
        all_ok = s.reduce_boolean_decision(all(checks.values()), all=True)
        s.teardown()
    if rank == 0:
        print(json.dumps({"losses": losses, "probe": probe.tolist(), "checks": checks, "all_ranks_ok": all_ok}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
