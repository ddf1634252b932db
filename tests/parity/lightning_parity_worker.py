"""One rank of the Lightning parity run: the same inputs go through
Lightning's own _sync_ddp / _gather_all_tensors (torch.distributed, gloo)
and through libddp (C API); the results must be identical, bit for bit."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
from lightning_fabric.utilities.distributed import _gather_all_tensors, _sync_ddp

from ddp_ctypes import MEAN, SUM, Lib, exit_now

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch_port, ddp_port = int(os.environ["TORCH_PORT"]), int(os.environ["DDP_PORT"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{torch_port}", rank=rank, world_size=world)
lib = Lib()
g = lib.group(rank, world, ddp_port)
failures = []


def inputs(dtype, shape, seed):
    gen = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=gen, dtype=torch.float64) * 10).to(dtype)
    lo = 0 if dtype == torch.uint8 else -50
    return torch.randint(lo, 50, shape, generator=gen, dtype=torch.int64).to(dtype)


dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64]
seed = 0
for dtype in dtypes:
    for op_name, op in (("mean", MEAN), ("sum", SUM)):
        for shape in [(), (7,), (3, 5)]:
            seed += 1
            x = inputs(dtype, shape, seed)
            if dtype in (torch.int8, torch.uint8) and op_name == "sum":
                x = x // 8  # keep int8 sums in range: wrap-around is not what we compare
            want = _sync_ddp(x.clone(), reduce_op=op_name)
            got = x.clone().contiguous()
            h = lib.wrap(got)
            lib.check(lib.lib.ddp_all_reduce(g, h, op), "all_reduce")
            lib.lib.ddp_tensor_free(h)
            if not torch.equal(want, got):
                failures.append(f"sync_ddp {op_name} {dtype} {shape}: lightning {want} libddp {got}")

# gather_all_tensors: uneven shapes (same ndim), equal shapes, scalars.
for dtype in dtypes:
    for case, shape in [("uneven-1d", (rank + 1,)), ("uneven-2d", (rank + 1, 4 - rank % 3)),
                        ("equal", (2, 3)), ("scalar", ())]:
        seed += 1
        x = inputs(dtype, shape, seed).contiguous()
        want = _gather_all_tensors(x)
        out = (ctypes.c_void_p * world)()
        h = lib.wrap(x)
        lib.check(lib.lib.ddp_all_gather_uneven(g, h, out), "all_gather_uneven")
        lib.lib.ddp_tensor_free(h)
        for r in range(world):
            got = lib.to_torch(out[r], dtype)
            lib.lib.ddp_tensor_free(out[r])
            if got.shape != want[r].shape or not torch.equal(got, want[r]):
                failures.append(f"gather_all_tensors {case} {dtype} from rank {r}: lightning {want[r]} libddp {got}")

lib.lib.ddp_group_free(g)
dist.destroy_process_group()
for f in failures[:20]:
    print(f"[rank {rank}] MISMATCH {f}", file=sys.stderr)
print(f"[rank {rank}] {seed} cases, {len(failures)} mismatches")
exit_now(1 if failures else 0)
