"""The 2-rank all-reduce and a gradient-sync step from Python (libddp's
SWIG binding, NumPy arrays reduced in place without copies):
    PYTHONPATH=build/bindings/python build/tools/ddprun --standalone --nproc-per-node 2 \\
        .venv/bin/python examples/python/allreduce_and_grad_sync.py"""
import numpy as np

import libddp

with libddp.Group() as g:  # the environment ddprun/torchrun/SLURM gives
    rank = g.rank()
    x = np.array([rank, rank + 1, rank + 2], dtype=np.float32)
    g.all_reduce(libddp.wrap(x), libddp.SUM)
    print(f"[rank {rank}] all_reduce SUM: {x}")

    # Gradients owned by the caller (any framework's buffers): mark each
    # ready as backward produces it; finish() leaves the average everywhere.
    grads = [np.zeros((4, 3), np.float32), np.zeros(4, np.float32)]
    with libddp.CommHook.fp16_compress() as hook:
        reducer = libddp.reducer(g, grads)
        reducer.set_comm_hook(hook)
        grads[1][:] = rank + np.arange(4)
        reducer.mark_ready(1)
        grads[0][:] = 10 * rank + np.arange(12).reshape(4, 3)
        reducer.mark_ready(0)
        reducer.finish()
        reducer.close()
    print(f"[rank {rank}] averaged bias grad: {grads[1]}")
