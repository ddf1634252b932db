"""One rank of the DDP parity run. The same model, initial weights and
per-rank data are trained twice in this process for 50 SGD steps:
  - with torch's DistributedDataParallel (torch.distributed, gloo);
  - with plain PyTorch autograd whose gradient buffers are handed to
    libddp's reducer: each gradient is marked ready from its
    post-accumulate-grad hook (so buckets overlap backward), and
    ddp_reducer_finish ends the step.
Steps 20-22 run under no_sync (DDP's no_sync / libddp's set_sync(0)).
Final parameters must be bitwise equal."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_ctypes import Lib, exit_now

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
model_name = os.environ["MODEL"]
hook_name = os.environ.get("HOOK", "")
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                        world_size=world)
lib = Lib()
group = lib.group(rank, world, int(os.environ["DDP_PORT"]))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(x.flatten(1))


class WithUnused(MLP):
    def __init__(self):
        super().__init__()
        self.unused = nn.Linear(32, 32)  # never used in forward


MODELS = {"mlp": (MLP, (32,)), "conv": (ConvNet, (3, 8, 8)), "unused": (WithUnused, (32,))}
cls, in_shape = MODELS[model_name]
find_unused = model_name == "unused"
torch.manual_seed(0)
reference = cls()
batches = []
gen = torch.Generator().manual_seed(100 + rank)
for _ in range(50):
    batches.append((torch.randn((16,) + in_shape, generator=gen), torch.randint(0, 10, (16,), generator=gen)))
no_sync_steps = {20, 21, 22}
loss_fn = nn.CrossEntropyLoss()

# 1. PyTorch DDP.
ddp_model = DDP(cls(), find_unused_parameters=find_unused)
if hook_name:
    from torch.distributed.algorithms.ddp_comm_hooks import debugging_hooks, default_hooks as default
    torch_hooks = {
        "allreduce": default.allreduce_hook,
        "fp16": default.fp16_compress_hook,
        "bf16": default.bf16_compress_hook,
        "fp16_wrap": default.fp16_compress_wrapper(default.allreduce_hook),
        "bf16_wrap": default.bf16_compress_wrapper(default.allreduce_hook),
        "noop": debugging_hooks.noop_hook,
    }
    ddp_model.register_comm_hook(None, torch_hooks[hook_name])
ddp_model.module.load_state_dict(reference.state_dict())
opt = torch.optim.SGD(ddp_model.parameters(), lr=0.05)
for step, (x, y) in enumerate(batches):
    if step in no_sync_steps:
        with ddp_model.no_sync():
            loss_fn(ddp_model(x), y).backward()
        continue
    loss_fn(ddp_model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=False)

# 2. The same training, gradients reduced by libddp. Rank 1 starts from
#    perturbed weights: the reducer's broadcast must bring rank 0's.
model = cls()
model.load_state_dict(reference.state_dict())
params = list(model.parameters())
if rank == 1:
    with torch.no_grad():
        for p in params:
            p.add_(1.0)
for p in params:
    p.grad = torch.zeros_like(p)
reducer, keep = lib.reducer(group, [p.data for p in params], [p.grad for p in params], find_unused=find_unused,
                            first_mb=0.25, cap_mb=1.0)
if hook_name:
    import ctypes
    h = ctypes.c_void_p()
    L = lib.lib
    for f in ("ddp_comm_hook_allreduce", "ddp_comm_hook_fp16_compress", "ddp_comm_hook_bf16_compress",
              "ddp_comm_hook_noop"):
        getattr(L, f).argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    for f in ("ddp_comm_hook_wrap_fp16", "ddp_comm_hook_wrap_bf16"):
        getattr(L, f).argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    L.ddp_reducer_set_comm_hook.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    L.ddp_comm_hook_free.argtypes = [ctypes.c_void_p]
    if hook_name.endswith("_wrap"):
        inner = ctypes.c_void_p()
        lib.check(L.ddp_comm_hook_allreduce(ctypes.byref(inner)), "allreduce hook")
        lib.check(getattr(L, "ddp_comm_hook_wrap_" + hook_name[:4])(ctypes.byref(h), inner), "wrapper")
        L.ddp_comm_hook_free(inner)
    else:
        maker = {"allreduce": "ddp_comm_hook_allreduce", "fp16": "ddp_comm_hook_fp16_compress",
                 "bf16": "ddp_comm_hook_bf16_compress", "noop": "ddp_comm_hook_noop"}[hook_name]
        lib.check(getattr(L, maker)(ctypes.byref(h)), maker)
    lib.check(L.ddp_reducer_set_comm_hook(reducer, h), "set_comm_hook")
    L.ddp_comm_hook_free(h)
for i, p in enumerate(params):
    p.register_post_accumulate_grad_hook(lambda _p, i=i: lib.check(lib.lib.ddp_reducer_mark_ready(reducer, i),
                                                                   "mark_ready"))
opt = torch.optim.SGD(params, lr=0.05)
for step, (x, y) in enumerate(batches):
    sync = step not in no_sync_steps
    lib.check(lib.lib.ddp_reducer_set_sync(reducer, int(sync)), "set_sync")
    loss_fn(model(x), y).backward()
    lib.check(lib.lib.ddp_reducer_finish(reducer), "finish")
    if sync:
        opt.step()
        opt.zero_grad(set_to_none=False)

buckets = lib.lib.ddp_reducer_bucket_count(reducer)
mismatches = []
for (name, a), b in zip(ddp_model.module.named_parameters(), params):
    if not torch.equal(a.detach(), b.detach()):
        mismatches.append(f"{name}: max |diff| {(a - b).abs().max().item():.3g}")
print(f"[rank {rank}] model={model_name} hook={hook_name or 'none'} buckets={buckets} {len(params)} params, {len(mismatches)} mismatches")
for m in mismatches[:10]:
    print(f"[rank {rank}] MISMATCH {m}")
lib.lib.ddp_reducer_free(reducer)
lib.lib.ddp_group_free(group)
dist.destroy_process_group()
exit_now(1 if mismatches else 0)
