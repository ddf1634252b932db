"""Per-call cost of an all-reduce from Python on one rank (no network, so
what is measured is the call path): libddp's SWIG binding on a NumPy array
(tensor wrapped once, and wrapped on every call) against
torch.distributed.all_reduce (gloo) on a torch tensor, in one process,
blocks alternating. Prints median microseconds per call and the ratios."""
import json
import os
import socket
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

import libddp


def port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_call_us(fn, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port()}", rank=0, world_size=1)
group = libddp.Group(rank=0, world_size=1, master_addr="127.0.0.1", master_port=0)
blocks, calls = int(os.environ.get("BLOCKS", "15")), int(os.environ.get("CALLS", "200"))
rows = []
for nbytes in (4, 4096, 1 << 20):
    n = nbytes // 4
    arr = np.ones(n, np.float32)
    wrapped = libddp.wrap(arr)
    tt = torch.ones(n)
    impls = {
        "libddp (wrapped once)": lambda: group.all_reduce(wrapped, libddp.SUM),
        "libddp (wrap per call)": lambda: group.all_reduce(libddp.wrap(arr), libddp.SUM),
        "torch.distributed": lambda: dist.all_reduce(tt),
    }
    times = {k: [] for k in impls}
    for _ in range(blocks):
        for k, fn in impls.items():
            times[k].append(per_call_us(fn, calls))
    for k, v in times.items():
        rows.append({"bytes": nbytes, "impl": k, "us_p50": statistics.median(v)})
print(f"{'bytes':>8} {'implementation':24} {'us/call p50':>12} {'vs torch.distributed':>21}")
for r in rows:
    base = next(x["us_p50"] for x in rows if x["bytes"] == r["bytes"] and x["impl"] == "torch.distributed")
    print(f"{r['bytes']:>8} {r['impl']:24} {r['us_p50']:12.1f} {r['us_p50'] / base:20.2f}x")
json.dump(rows, sys.stderr)
group.close()
dist.destroy_process_group()
