"""Post-local SGD with periodic model averaging: libddp (post-local SGD hook
+ ddp_model_averager) against PyTorch's post_localSGD_hook +
PeriodicModelAverager, 4 real processes as 2 "nodes" of 2 (subgroups of 2).

Both sides train the same model from the same weights on the same per-rank
data with SGD; PyTorch's hook is called on GradBucket stand-ins holding the
same buckets as libddp's reducer. After every step the parameters must be
bitwise equal, and the run checks the property the algorithm is for: right
after an averaging step every rank holds the same parameters; between
averagings they agree within a subgroup and differ across subgroups."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as localsgd
from torch.distributed.algorithms.model_averaging import averagers

from ddp_ctypes import Lib, exit_now
from grad_bucket import GradBucket

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
START, PERIOD, WARMUP, STEPS = 4, 3, 4, 16
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                        world_size=world)
torch_sub, _ = dist.new_subgroups(group_size=2)
lib = Lib()
L = lib.lib
vp = ctypes.c_void_p
group = lib.group(rank, world, int(os.environ["DDP_PORT"]))
sub = vp()
lib.check(L.ddp_group_new_subgroups(group, 2, ctypes.byref(sub)), "new_subgroups")


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 24), torch.nn.Tanh(),
                               torch.nn.Linear(24, 3))


def batch(step):
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(16, 12, generator=g), torch.randn(16, 3, generator=g)


# libddp: reducer (caller-owned gradients) + post-local SGD hook + averager.
ours = make_model()
ours_params = list(ours.parameters())
for p in ours_params:
    p.grad = torch.zeros_like(p)
reducer, keep = lib.reducer(group, None, [p.grad for p in ours_params], broadcast=False, first_mb=0.002,
                            cap_mb=0.004)
hook = vp()
lib.check(L.ddp_comm_hook_post_localsgd(ctypes.byref(hook), sub, START, 1), "post_localsgd")
lib.check(L.ddp_reducer_set_comm_hook(reducer, hook), "set_comm_hook")
averager = vp()
period_shift = int(os.environ.get("PERIOD_SHIFT", "0"))  # negative control
lib.check(L.ddp_model_averager_new(ctypes.byref(averager), group, PERIOD + period_shift, WARMUP), "averager")
param_handles = [lib.wrap(p.data) for p in ours_params]
param_array = (vp * len(param_handles))(*[h.value for h in param_handles])
buckets = lib.bucket_layout(reducer, len(ours_params))
nb = len(buckets)

# PyTorch: its hook on the same buckets, its averager.
theirs = make_model()
their_params = list(theirs.parameters())
state = localsgd.PostLocalSGDState(process_group=None, subgroup=torch_sub, start_localSGD_iter=START)
their_averager = averagers.PeriodicModelAverager(period=PERIOD, warmup_steps=WARMUP)


opt_ours = torch.optim.SGD(ours_params, lr=0.1)
opt_theirs = torch.optim.SGD(their_params, lr=0.1)
failures = []
for step in range(STEPS):
    x, y = batch(step)
    torch.nn.functional.mse_loss(ours(x), y).backward()
    lib.reduce_all(reducer, len(ours_params))
    opt_ours.step()
    opt_ours.zero_grad(set_to_none=False)
    lib.check(L.ddp_model_averager_step(averager, param_array, len(param_handles)), "averager_step")

    torch.nn.functional.mse_loss(theirs(x), y).backward()
    for b, indices in enumerate(buckets):
        buffer = torch.cat([their_params[i].grad.reshape(-1) for i in indices])
        out = localsgd.post_localSGD_hook(state, GradBucket(buffer, b, b == nb - 1)).wait()
        out = out[0] if isinstance(out, list) else out
        at = 0
        for i in indices:
            g = their_params[i].grad
            g.copy_(out[at:at + g.numel()].view_as(g))
            at += g.numel()
    opt_theirs.step()
    opt_theirs.zero_grad(set_to_none=False)
    their_averager.average_parameters(their_params)

    for i, (a, b) in enumerate(zip(ours_params, their_params)):
        if not torch.equal(a.detach(), b.detach()):
            failures.append(f"step {step} param {i}: max |diff| {(a - b).abs().max().item():.3g}")
    # What the ranks hold: all equal right after an averaging, per subgroup otherwise.
    flat = torch.cat([p.detach().reshape(-1) for p in ours_params])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    averaged = step >= WARMUP and (step - WARMUP) % PERIOD == 0
    same_all = all(torch.equal(everyone[0], t) for t in everyone)
    same_sub = torch.equal(everyone[0], everyone[1]) and torch.equal(everyone[2], everyone[3])
    if step >= START:
        if averaged and not same_all:
            failures.append(f"step {step}: ranks differ right after averaging")
        if not averaged and (same_all or not same_sub):
            failures.append(f"step {step}: want equal within subgroups only (all equal {same_all}, "
                            f"within {same_sub})")
    elif not same_all:
        failures.append(f"step {step}: ranks differ before local SGD starts")

print(f"[rank {rank}] post-local SGD start {START}, averaging every {PERIOD} from {WARMUP}, {STEPS} steps, "
      f"buckets {buckets}: {len(failures)} mismatches")
for f in failures[:10]:
    print(f"[rank {rank}] MISMATCH {f}")
L.ddp_model_averager_free(averager)
L.ddp_comm_hook_free(hook)
L.ddp_reducer_free(reducer)
L.ddp_group_free(sub)
L.ddp_group_free(group)
dist.destroy_process_group()
exit_now(1 if failures else 0)
