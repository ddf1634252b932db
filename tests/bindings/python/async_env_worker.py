"""Async collectives and the environment from Python, on 2 ranks started by
libddp.spawn, over Gloo: a started all_reduce and all_gather are waited on (results
checked against torch), Env reports the worker's place, and a wait with a
timeout on a collective rank 1 never joins raises E_TIMEOUT on rank 0 in
about that time. Rank 0 returns a JSON report."""
import json
import time

import torch

import libddp


def work(worker, arg):
    rank = worker.rank()
    checks = {}
    env = libddp.Env.detect()
    checks["env"] = (env.rank(), env.world_size(), env.local_rank(), env.node_rank()) == (rank, 2, rank, 0)
    # Gloo: its async collectives run apart from the caller, so a wait can
    # time out before the group's timeout (the shm backend runs a small one
    # on the caller's thread, bounded by the group's timeout alone).
    with libddp.Group.from_env(env, backend="gloo", timeout_ms=20000) as g:
        x = torch.full((4,), float(rank + 1))
        w1 = g.all_reduce_async(libddp.from_dlpack(x), libddp.SUM)
        w2 = g.all_gather_async(libddp.from_dlpack(torch.tensor([float(rank)])))
        w1.wait()
        w2.wait(10000)
        gathered = torch.from_dlpack(w2.result_tensor(0))
        checks["async"] = (torch.equal(x, torch.full((4,), 3.0)) and w1.is_completed()
                           and gathered.flatten().tolist() == [0.0, 1.0] and w2.result_count() == 1)
        # Into the caller's tensors: blocking (world x 3), then started (flat).
        out, flat = torch.zeros(2, 3), torch.zeros(6)
        g.all_gather_into_tensor(libddp.from_dlpack(torch.full((3,), float(rank))), libddp.from_dlpack(out))
        w4 = g.all_gather_into_tensor_async(libddp.from_dlpack(torch.arange(3.0) + rank), libddp.from_dlpack(flat))
        w4.wait()
        checks["into"] = (torch.equal(out, torch.tensor([[0.0] * 3, [1.0] * 3]))
                          and torch.equal(flat, torch.tensor([0.0, 1, 2, 1, 2, 3])))
        g.barrier()
        if rank == 0:
            w3 = g.all_reduce_async(libddp.from_dlpack(torch.ones(1)))  # rank 1 never joins
            t0 = time.monotonic()
            try:
                w3.wait(300)
                checks["timeout"] = False
            except libddp.Error as e:
                waited = time.monotonic() - t0
                checks["timeout"] = e.status == libddp.E_TIMEOUT and 0.25 < waited < 5
                if not checks["timeout"]:
                    checks["timeout_seen"] = [e.status, waited, e.message]
            worker.set_result(json.dumps(checks).encode())
        else:
            time.sleep(1.5)  # past rank 0's timeout, then leave without the collective
    return 0


if __name__ == "__main__":
    print(libddp.spawn(work, 2, b"", timeout_ms=60000).decode())
