"""One rank of the static_graph parity run: the same model (one layer that
forward never uses, and layers registered in another order than forward
runs them, so that the rebuilt buckets differ from the first ones), weights
and per-rank data train 10 SGD steps
  - under torch's DistributedDataParallel(static_graph=True), with a comm
    hook (PyTorch's allreduce_hook) recording which parameters each bucket
    holds at every step;
  - with plain autograd whose gradient buffers go through libddp's reducer
    with static_graph, each marked ready from its post-accumulate-grad hook.
At steps 1, 2, 3 and 10 the buckets (parameter indices, in order) and the
gradients must be equal (an unused parameter's None counts as zeros).
CHANGE=used|unused then runs one more step whose graph differs (the unused
layer used, or a used one left out) and expects the error naming the
gradient on this rank."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from ddp_ctypes import Lib, exit_now

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
change = os.environ.get("CHANGE", "")
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                        world_size=world)
lib = Lib()
L = lib.lib
group = lib.group(rank, world, int(os.environ["DDP_PORT"]))
# An explicit bucket_cap_mb is also PyTorch's first bucket's cap at the rebuild.
CAP_MB = 0.01
STEPS, CHECKED = 10, (1, 2, 3, 10)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.last = nn.Linear(32, 64)    # registered first, runs last: its gradients are ready first
        self.unused = nn.Linear(32, 32)  # never used (unless CHANGE=used, after the checked steps)
        self.first = nn.Linear(32, 32)
        self.middle = nn.Linear(32, 32)
        self.skip_middle = False

    def forward(self, x, use_unused=False):
        h = torch.relu(self.first(x))
        if not self.skip_middle:
            h = torch.relu(self.middle(h))
        out = self.last(h)
        return out + self.unused(x).sum() if use_unused else out


torch.manual_seed(0)
reference = Net()
gen = torch.Generator().manual_seed(100 + rank)
batches = [(torch.randn(8, 32, generator=gen), torch.randn(8, 64, generator=gen)) for _ in range(STEPS)]
loss_fn = nn.MSELoss()

# 1. PyTorch.
ddp_model = DDP(Net(), bucket_cap_mb=CAP_MB, static_graph=True)
ddp_model.module.load_state_dict(reference.state_dict())
index_of = {id(p): i for i, p in enumerate(ddp_model.module.parameters())}
torch_buckets = {}
step_now = [0]


def recording_hook(state, bucket):
    torch_buckets.setdefault(step_now[0], []).append([index_of[id(p)] for p in bucket.parameters()])
    return default_hooks.allreduce_hook(state, bucket)


ddp_model.register_comm_hook(None, recording_hook)
opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1)
torch_grads = {}
for step, (x, y) in enumerate(batches, start=1):
    step_now[0] = step
    loss_fn(ddp_model(x), y).backward()
    torch_grads[step] = [p.grad.clone() if p.grad is not None else torch.zeros_like(p)
                         for p in ddp_model.module.parameters()]
    opt.step()
    opt.zero_grad(set_to_none=False)

# 2. libddp's reducer with static_graph.
model = Net()
model.load_state_dict(reference.state_dict())
params = list(model.parameters())
for p in params:
    p.grad = torch.zeros_like(p)
reducer, keep = lib.reducer(group, [p.data for p in params], [p.grad for p in params],
                            first_mb=CAP_MB, cap_mb=CAP_MB, static_graph=True)
for i, p in enumerate(params):
    p.register_post_accumulate_grad_hook(lambda _p, i=i: lib.check(L.ddp_reducer_mark_ready(reducer, i), "mark_ready"))


opt = torch.optim.SGD(params, lr=0.1)
failures = []
for step, (x, y) in enumerate(batches, start=1):
    before = lib.bucket_layout(reducer, len(params))
    loss_fn(model(x), y).backward()
    lib.check(L.ddp_reducer_finish(reducer), "finish")
    if step in CHECKED:
        if before != torch_buckets[step]:
            failures.append(f"step {step}: buckets {before}, PyTorch's {torch_buckets[step]}")
        for i, (a, b) in enumerate(zip(torch_grads[step], params)):
            if not torch.equal(a, b.grad):
                failures.append(f"step {step}: gradient {i} differs by {(a - b.grad).abs().max().item():.3g}")
    opt.step()
    for p in params:
        p.grad.zero_()
print(f"[rank {rank}] buckets at steps 1, 2, 3, 10: {[torch_buckets[s] for s in CHECKED]}")
print(f"[rank {rank}] {len(failures)} mismatches")
for f in failures[:10]:
    print(f"[rank {rank}] MISMATCH {f}")

if change:
    x, y = batches[0]
    model.skip_middle = change == "unused"
    try:
        loss_fn(model(x, use_unused=change == "used"), y).backward()
        lib.check(L.ddp_reducer_finish(reducer), "finish")
        print(f"[rank {rank}] CHANGE={change}: no error")
    except Exception as e:  # noqa: BLE001 - the error is what is checked
        print(f"[rank {rank}] CHANGE={change}: {e}")
L.ddp_reducer_free(reducer)
L.ddp_group_free(group)
dist.destroy_process_group()
exit_now(1 if failures else 0)
