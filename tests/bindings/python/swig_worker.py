"""Two ranks through the SWIG Python binding, started by libddp.spawn itself
(popen: each worker re-runs this script up to the spawn call). Every result
is checked against torch on the same inputs; rank 0 returns a JSON report."""
import json
import sys

import numpy as np

import libddp

WORLD = 2


def inputs(rank, n=1000):
    return np.random.RandomState(rank).randn(n).astype(np.float32)


def work(worker, arg):
    import torch

    rank, world = worker.rank(), worker.world_size()
    checks = {}
    with libddp.Group() as g:  # the environment spawn gave this worker
        checks["rank"] = g.rank() == rank and g.size() == world
        # all_reduce SUM and MEAN, in place in NumPy memory.
        x = inputs(rank)
        g.all_reduce(libddp.wrap(x), libddp.SUM)
        want = torch.stack([torch.from_numpy(inputs(r)) for r in range(world)]).sum(0).numpy()
        checks["all_reduce_sum"] = bool(np.array_equal(x, want))
        y = inputs(rank)
        g.all_reduce(libddp.wrap(y), libddp.MEAN)
        checks["all_reduce_mean"] = bool(np.allclose(y, want / world, rtol=0, atol=1e-6))
        # Lightning's gather_all_tensors: rank r sends r + 1 rows.
        mine = np.full((rank + 1, 3), float(rank), np.float32)
        parts = [libddp.to_numpy(t) for t in g.all_gather_uneven(libddp.wrap(mine))]
        checks["all_gather_uneven"] = [p.shape for p in parts] == [(r + 1, 3) for r in range(world)] and all(
            np.all(p == r) for r, p in enumerate(parts))
        checks["broadcast_bytes"] = g.broadcast_bytes(b"from rank 0" if rank == 0 else b"", 0) == b"from rank 0"
        checks["reduce_boolean_decision"] = g.reduce_boolean_decision(rank == 0, all=False) is True
        # A reducer step with PyTorch's fp16 hook: cast, divide by the world
        # size, sum, cast back (torch computes the same on the same inputs).
        grads = [inputs(10 + rank, 64).reshape(8, 8).copy(), inputs(20 + rank, 8)]
        local = [a.copy() for a in grads]
        with libddp.CommHook.fp16_compress() as hook:
            r = libddp.reducer(g, grads, bucket_cap_mb=1)
            r.set_comm_hook(hook)
            for i in reversed(range(len(grads))):
                r.mark_ready(i)
            r.finish()
            r.close()
        every = [[inputs(10 + q, 64).reshape(8, 8), inputs(20 + q, 8)] for q in range(world)]
        ok = True
        for i, got in enumerate(grads):
            half = [torch.from_numpy(e[i]).half().div_(world) for e in every]
            want = (half[0] + half[1]).float().numpy()
            ok = ok and bool(np.array_equal(got, want)) and not np.array_equal(got, local[i])
        checks["reducer_fp16_hook"] = ok
        # torch tensors through DLPack: a parameter's gradient and a strided
        # view are all-reduced in place, in torch's own memory.
        p = torch.nn.Parameter(torch.zeros(4, 6))
        (p * torch.from_numpy(inputs(30 + rank, 24)).reshape(4, 6)).sum().backward()
        before = p.grad.data_ptr()
        view = libddp.from_dlpack(p.grad)
        g.all_reduce(view, libddp.SUM)
        want = sum(torch.from_numpy(inputs(30 + q, 24)).reshape(4, 6) for q in range(world))
        # A strided view is refused (libddp's tensors are contiguous), naming why.
        strided = torch.arange(12, dtype=torch.float64).reshape(3, 4)[:, ::2]
        try:
            libddp.from_dlpack(strided)
            refused = False
        except libddp.Error as e:
            refused = e.status == libddp.E_INVALID_ARGUMENT and "not contiguous" in e.message
        checks["dlpack_all_reduce_in_torch_memory"] = (
            view.data_address() == before and p.grad.data_ptr() == before and torch.equal(p.grad, want)
            and refused)
        gathered = g.all_gather(libddp.from_dlpack(torch.full((2,), float(rank))))
        out = torch.from_dlpack(gathered)
        checks["dlpack_all_gather_to_torch"] = (out.data_ptr() == gathered.data_address()
                                                and out.tolist() == [[float(q)] * 2 for q in range(world)])
        # A comm hook written in Python (the allreduce hook's algorithm: sum, divide)
        # averages as PyTorch's allreduce_hook does, seeing the bucket's layout.
        seen = []

        def average(group, bucket):
            seen.append((bucket.index, bucket.is_last, bucket.divisor, bucket.params))
            group.all_reduce(bucket.buffer, libddp.SUM)
            torch.from_dlpack(bucket.buffer).div_(bucket.divisor)

        grads = [np.full(5, rank + 1.0, np.float32), np.full((2, 3), 10.0 * (rank + 1), np.float32)]
        r = libddp.reducer(g, grads, bucket_cap_mb=1)
        r.set_comm_hook(libddp.CommHook.custom(average))
        r.mark_ready(1)
        r.mark_ready(0)
        r.finish()
        want = [torch.full((5,), 1.5), torch.full((2, 3), 15.0)]  # torch: (1 + 2) / 2, (10 + 20) / 2
        checks["python_comm_hook"] = (all(torch.equal(torch.from_numpy(a), w) for a, w in zip(grads, want))
                                      and seen == [(0, True, world, [(1, 0, (2, 3)), (0, 6, (5,))])])  # DDP: last first
        r.close()
        # A failing call raises libddp.Error with the status and the message.
        try:
            g.broadcast(libddp.wrap(np.zeros(2, np.float32)), src=world)
            checks["error"] = False
        except libddp.Error as e:
            checks["error"] = e.status == libddp.E_INVALID_ARGUMENT and "src" in e.message
        # Blocking calls release the GIL: while rank 0 waits in a barrier that
        # rank 1 enters 1 s late, a Python thread of rank 0 keeps running.
        import threading
        import time
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.01)

        ticker = threading.Thread(target=tick)
        ticker.start()
        if rank == 1:
            time.sleep(1.0)
        g.barrier()
        stop.set()
        ticker.join()
        checks["gil_released_while_blocked"] = rank == 1 or len(ticks) > 20
        everyone_ok = g.reduce_boolean_decision(all(bool(v) for v in checks.values()), all=True)
    if rank == 0:
        worker.set_result(json.dumps({"checks": checks, "all_ranks_ok": everyone_ok}).encode())
    return 0


if __name__ == "__main__":
    result = libddp.spawn(work, WORLD, b"", timeout_ms=120000)
    print(result.decode())
    sys.exit(0 if json.loads(result)["all_ranks_ok"] else 1)
