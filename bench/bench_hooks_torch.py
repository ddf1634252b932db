"""The peer of bench_hooks.c: PyTorch's DistributedDataParallel with
PyTorch's own comm hooks on the same communication-bound model (LAYERS x
(DIM x DIM weight + bias), gradients that are fixed per rank, almost no
compute). Same environment and output as bench_hooks.
    bench_hooks_torch.py <iface> [steps] [dim] [layers]"""
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as default
from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as localsgd
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps
from torch.nn.parallel import DistributedDataParallel as DDP

iface = sys.argv[1] if len(sys.argv) > 1 else "lo"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
dim = int(sys.argv[3]) if len(sys.argv) > 3 else 1024
layers = int(sys.argv[4]) if len(sys.argv) > 4 else 8
WARMUP = 3
torch.set_num_threads(1)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))  # a dead peer ends the run
rank = dist.get_rank()
# batched_powerSGD_hook hands 2-D matrices to _orthogonalize, which asserts a
# 3-D batch in this torch; give it the batch of one it expects.
_plain_orthogonalize = ps._orthogonalize
ps._orthogonalize = lambda m, epsilon=0: _plain_orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)


class Model(torch.nn.Module):
    """loss = sum(p * g): backward leaves exactly g in each p.grad."""

    def __init__(self):
        super().__init__()
        shapes = [s for _ in range(layers) for s in ((dim, dim), (dim,))]
        self.ps = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(s)) for s in shapes)
        gen = torch.Generator().manual_seed(1 + rank)
        self.g = [torch.rand(s, generator=gen) - 0.5 for s in shapes]

    def forward(self):
        return sum((p * g).sum() for p, g in zip(self.ps, self.g))


def tx_bytes():
    try:
        with open(f"/sys/class/net/{iface}/statistics/tx_bytes") as f:
            return int(f.read())
    except OSError:
        return -1


def hook_for(name):
    """(state, hook) as one registers them with DDP."""
    psgd = lambda **kw: ps.PowerSGDState(process_group=None, start_powerSGD_iter=2, **kw)
    if name == "allreduce":
        return None, default.allreduce_hook
    if name == "fp16":
        return None, default.fp16_compress_hook
    if name == "bf16":
        return None, default.bf16_compress_hook
    if name == "powersgd_r1":
        return psgd(matrix_approximation_rank=1), ps.powerSGD_hook
    if name == "powersgd_r4":
        return psgd(matrix_approximation_rank=4), ps.powerSGD_hook
    if name == "batched_powersgd_r1":
        return psgd(matrix_approximation_rank=1), ps.batched_powerSGD_hook
    if name == "fp16_powersgd_r1":
        return psgd(matrix_approximation_rank=1), default.fp16_compress_wrapper(ps.powerSGD_hook)
    if name == "post_localsgd":  # each rank its own subgroup, as LOCAL_WORLD_SIZE=1 gives libddp
        sub, _ = dist.new_subgroups(group_size=1)
        return localsgd.PostLocalSGDState(process_group=None, subgroup=sub, start_localSGD_iter=WARMUP), \
            localsgd.post_localSGD_hook
    if name == "noop":
        return None, debugging_hooks.noop_hook
    raise ValueError(name)


# On Gloo, PyTorch's PowerSGD hooks issue each next all-reduce from whichever
# thread completed the previous one, so with several buckets in flight two
# ranks can issue them in different orders and Gloo aborts ("Received data
# size doesn't match expected size"; seen here with 2 buckets). The
# PowerSGD-family hooks therefore get one bucket here (libddp issues every
# stage in bucket order from the waiting thread and keeps the default caps).
ONE_BUCKET_MB = 1024
hooks = os.environ.get("HOOKS", "allreduce fp16 bf16 powersgd_r1 powersgd_r4 batched_powersgd_r1 post_localsgd noop "
                                 "fp16_powersgd_r1").split()
for name in hooks:
    model = DDP(Model(), bucket_cap_mb=ONE_BUCKET_MB if "powersgd" in name else None)
    state, hook = hook_for(name)
    model.register_comm_hook(state, hook)
    times, tx0 = [], 0
    for step in range(WARMUP + steps):
        if step == WARMUP:
            dist.barrier()
            tx0 = tx_bytes()
        t0 = time.perf_counter()
        model().backward()
        times.append((time.perf_counter() - t0) * 1e3)
    tx = tx_bytes() - tx0
    times = sorted(times[WARMUP:])
    rate = 0.0
    if isinstance(state, ps.PowerSGDState):
        rate = state.compression_stats()[0]
    if rank == 0:
        print(json.dumps({"hook": name, "impl": "pytorch-ddp", "iface": iface,
                          "params": sum(p.numel() for p in model.parameters()), "steps": steps,
                          "step_ms_p50": round(times[len(times) // 2], 3), "step_ms_min": round(times[0], 3),
                          "tx_bytes_per_step": tx / steps if tx0 >= 0 else -1, "compression_rate": rate}), flush=True)
    dist.barrier()
dist.destroy_process_group()
