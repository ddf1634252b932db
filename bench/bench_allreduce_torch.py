"""torch.distributed.all_reduce (gloo) from Python: the peer of bench_allreduce.
One process per rank; rank 0 prints one JSON line per size."""
import json
import os
import time

import torch
import torch.distributed as dist

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
rounds = int(os.environ.get("BENCH_ROUNDS", "3"))
max_bytes = int(os.environ.get("BENCH_MAX_MB", "64")) << 20
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}",
                        rank=rank, world_size=world)


def iterations_for(nbytes):
    return 400 if nbytes <= 64 * 1024 else 100 if nbytes <= 1 << 20 else 20 if nbytes <= 16 << 20 else 8


size = 4
while size <= max_bytes:
    t = torch.ones(size // 4, dtype=torch.float32)
    lat = []
    for _ in range(rounds):
        dist.barrier()
        for i in range(iterations_for(size) + 3):
            t0 = time.perf_counter()
            dist.all_reduce(t)
            us = (time.perf_counter() - t0) * 1e6
            if i >= 3:
                lat.append(us)
    lat.sort()
    if rank == 0:
        p = lambda q: lat[min(len(lat) - 1, int(q * (len(lat) - 1) + 0.5))]
        print(json.dumps({"impl": "torch.distributed", "bytes": size, "p10_us": p(0.1), "p50_us": p(0.5), "p90_us": p(0.9),
                          "n": len(lat)}), flush=True)
    size *= 4
dist.destroy_process_group()
