"""The strategy's and the group's calls on two ranks through the SWIG Python
binding: this script is rank 0 and the strategy starts rank 1 by running it
again. Rank 0 prints a JSON report of named checks, each computed from both
ranks' values, for test_training_surface.py.
    surface_worker.py <scratch directory>"""
import json
import os
import sys

import numpy as np
import torch

import libddp

WORLD = 2


def t(values, dtype=torch.float32):
    return libddp.from_dlpack(torch.tensor(values, dtype=dtype))


def main(scratch):
    checks = {}
    with libddp.Strategy(devices=WORLD, timeout_ms=60000) as s:
        s.setup_environment()
        rank = s.global_rank()
        g = s.group()
        checks["group"] = (g.size(), g.rank()) == (WORLD, rank)

        # Subgroups of one rank each: the strategy's reduce over one leaves the value.
        sub = g.new_subgroups(1)
        mine = t([float(rank + 1)])
        s.reduce(mine, libddp.SUM, sub)
        whole = t([float(rank + 1)])
        s.reduce(whole, libddp.SUM)
        checks["reduce_over_subgroup"] = mine.item() == rank + 1 and whole.item() == 3.0

        # all_gather with sync_grads: each rank's gradient is the sum over the ranks of its slice's.
        x = t([1.0, 2.0]) * float(rank + 1)
        x = x.clone()
        x.set_requires_grad(True)
        gathered = s.all_gather(x, sync_grads=True)
        weights = t([[1.0, 2.0], [3.0, 4.0]]) * float(rank + 1)  # rank r weighs slice k by (r+1)*w[k]
        (gathered * weights).sum().backward()
        expected = (1 + 2) * np.array([[1.0, 2.0], [3.0, 4.0]])[rank]
        checks["all_gather_sync_grads"] = gathered.dim_size(0) == WORLD and bool(
            np.allclose(torch.from_dlpack(x.grad()).numpy(), expected))

        # gather_all_tensors of different lengths, and broadcast of bytes from rank 1.
        parts = s.all_gather_uneven(t([float(rank)] * (rank + 1)))
        checks["all_gather_uneven"] = [p.numel() for p in parts] == [1, 2] and parts[1].sum().item() == 2.0
        checks["broadcast_bytes"] = s.broadcast_bytes(b"from one" if rank == 1 else b"", src=1) == b"from one"

        # The logged metric with sync_dist: the weighted mean over both ranks' batches.
        metric = libddp.Metric()
        metric.update(float(rank + 1), 2)
        checks["metric_sync_dist"] = abs(metric.compute(s) - 1.5) < 1e-6 and metric.compute() == rank + 1

        # SyncBatchNorm's forward against batch_norm over both ranks' batches at once.
        batches = [torch.arange(12, dtype=torch.float32).reshape(4, 3) * (r + 1) for r in range(WORLD)]
        mean, var = torch.zeros(3), torch.ones(3)
        out = s.batch_norm(libddp.from_dlpack(batches[rank]), None, None, libddp.from_dlpack(mean),
                           libddp.from_dlpack(var), True)
        whole_batch = torch.nn.functional.batch_norm(torch.cat(batches), torch.zeros(3), torch.ones(3),
                                                     training=True)
        checks["sync_batch_norm"] = bool(torch.allclose(torch.from_dlpack(out.clone()),
                                                        whole_batch[4 * rank:4 * rank + 4], atol=1e-5))

        # The group's state and its async byte, decision and uneven collectives.
        g.set_timeout(45000)
        g.set_debug_detail(True)
        checks["group_state"] = g.timeout_ms() == 45000 and g.debug_detail() and not g.is_broken()
        g.set_debug_detail(False)
        w = g.broadcast_bytes_async(b"zero" if rank == 0 else b"", 0)
        w.wait()
        d = g.reduce_boolean_decision_async(rank == 0, all=False)
        d.wait()
        u = g.all_gather_uneven_async(t([1.0] * (rank + 2)))
        u.wait()
        checks["group_async"] = (w.result_bytes() == b"zero" and d.result_decision() is True
                                 and u.result_tensor(1).numel() == 3)

        # Two modules in one checkpoint under their prefixes, loaded into fresh ones; then removed.
        a = [torch.full((2,), 1.0 + rank * 0), torch.full((3,), 2.0)]
        b = [torch.full((2,), 5.0)]
        mods = [libddp.Module.from_tensors(["w", "v"], [libddp.from_dlpack(x) for x in a], 0),
                libddp.Module.from_tensors(["w"], [libddp.from_dlpack(x) for x in b], 0)]
        ckpt = os.path.join(scratch, "two.ckpt")
        info = libddp.CheckpointInfo()
        info.step = 7
        s.save_checkpoint_modules(ckpt, mods, ["generator.", "discriminator."], [], [], info)
        keys = sorted(torch.load(ckpt, weights_only=False)["state_dict"]) if rank == 0 else []
        fresh_a, fresh_b = [torch.zeros(2), torch.zeros(3)], [torch.zeros(2)]
        fresh = [libddp.Module.from_tensors(["w", "v"], [libddp.from_dlpack(x) for x in fresh_a], 0),
                 libddp.Module.from_tensors(["w"], [libddp.from_dlpack(x) for x in fresh_b], 0)]
        back = libddp.CheckpointInfo()
        s.load_checkpoint_modules(ckpt, fresh, ["generator.", "discriminator."], [], [], back)
        checks["checkpoint_modules"] = (back.step == 7 and torch.equal(fresh_b[0], b[0])
                                        and torch.equal(fresh_a[1], a[1]))
        if rank == 0:
            checks["checkpoint_keys"] = keys == ["discriminator.w", "generator.v", "generator.w"]
        s.remove_checkpoint(ckpt)
        checks["remove_checkpoint"] = not os.path.exists(ckpt)

        all_ok = s.reduce_boolean_decision(all(checks.values()), all=True)
        s.teardown()
    if rank == 0:
        print(json.dumps({"checks": checks, "all_ranks_ok": all_ok}))


if __name__ == "__main__":
    main(sys.argv[1])
