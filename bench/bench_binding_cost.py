"""Python's side of bench/run_binding_cost.sh: the calls of
bench_binding_cost.c through the SWIG binding (arrays wrapped once, as a
training loop would), on 2 ranks under ddprun."""
import json
import statistics
import time

import numpy as np

import libddp

GRADS, GRAD_LEN, CALLS, BLOCKS, WARMUP = 4, 256, 2000, 7, 200


def median_us(g, fn):
    for _ in range(WARMUP):
        fn()
    per = []
    for _ in range(BLOCKS):
        g.barrier()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            fn()
        per.append((time.perf_counter() - t0) / CALLS * 1e6)
    return statistics.median(per)


with libddp.Group() as g:
    scalar = libddp.wrap(np.ones(1, np.float32))
    grads = [np.zeros(GRAD_LEN, np.float32) for _ in range(GRADS)]
    r = libddp.reducer_with(g, [libddp.wrap(a) for a in grads])
    r._arrays = grads

    def step():
        for i in reversed(range(GRADS)):
            r.mark_ready(i)
        r.finish()

    ar = median_us(g, lambda: g.all_reduce(scalar, libddp.SUM))
    st = median_us(g, step)
    if g.rank() == 0:
        print(json.dumps({"lang": "python", "allreduce_us": round(ar, 3), "reducer_step_us": round(st, 3)}))
    r.close()
