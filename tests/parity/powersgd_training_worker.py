"""A short training run through libddp's reducer (2 ranks): plain
all-reduce, PowerSGD rank 2 with error feedback, and PowerSGD rank 2
without it, from the same weights on the same data. Prints each run's final
loss on held-out data; the test compares them."""
import ctypes
import os
import sys

import torch

from ddp_ctypes import Lib, exit_now

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
steps = int(os.environ.get("STEPS", "300"))
lib = Lib()
L = lib.lib
group = lib.group(rank, world, int(os.environ["DDP_PORT"]))


vp = ctypes.c_void_p

# A teacher network makes the targets; the student sees noisy batches.
torch.manual_seed(0)
teacher = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 32))
x_eval = torch.randn(2048, 64)
with torch.no_grad():
    y_eval = teacher(x_eval)


def batch(step):
    g = torch.Generator().manual_seed(10_000 * rank + step)
    x = torch.randn(32, 64, generator=g)
    with torch.no_grad():
        return x, teacher(x) + 0.01 * torch.randn(32, 32, generator=g)


def train(powersgd_feedback):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(), torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 32))
    params = list(model.parameters())
    for p in params:
        p.grad = torch.zeros_like(p)
    reducer, keep = lib.reducer(group, [p.data for p in params], [p.grad for p in params])
    if powersgd_feedback is not None:
        o = lib.powersgd_options(matrix_approximation_rank=2, start_powersgd_iter=10,
                                 use_error_feedback=int(powersgd_feedback))
        h = vp()
        lib.check(L.ddp_comm_hook_powersgd(ctypes.byref(h), ctypes.byref(o)), "powersgd")
        lib.check(L.ddp_reducer_set_comm_hook(reducer, h), "set_comm_hook")
        L.ddp_comm_hook_free(h)
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    for step in range(steps):
        x, y = batch(step)
        torch.nn.functional.mse_loss(model(x), y).backward()
        lib.reduce_all(reducer, len(params))
        opt.step()
        opt.zero_grad(set_to_none=False)
    L.ddp_reducer_free(reducer)
    with torch.no_grad():
        return torch.nn.functional.mse_loss(model(x_eval), y_eval).item()


losses = {name: train(fb) for name, fb in (("allreduce", None), ("powersgd_ef", True), ("powersgd_no_ef", False))}
print(f"[rank {rank}] " + " ".join(f"{k}={v:.6f}" for k, v in losses.items()))
L.ddp_group_free(group)
exit_now(0)
