"""PyTorch DDP step time (the peer of bench_ddp_step). Started by ddprun
(torchrun's environment); rank 0 prints one JSON line.
usage: bench_ddp_step_torch.py <mlp|mlp-large|conv> <bucket_cap_mb> [steps]
BENCH_DEVICE=cuda: on cuda:LOCAL_RANK with NCCL, each timed step ending in a
synchronize; BENCH_BATCH: the batch (32); BENCH_MODE=no-ddp: the same model
without DDP (the group is still made, for the barrier between steps);
BENCH_GRAD_VIEW=1: DDP(gradient_as_bucket_view=True), impl "pytorch-ddp-grad-view"."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp_models import make, time_steps  # noqa: E402

name, cap = sys.argv[1], float(sys.argv[2])
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 30
cuda = os.environ.get("BENCH_DEVICE") == "cuda"
mode = os.environ.get("BENCH_MODE", "overlap")
torch.set_num_threads(1)
device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if cuda else torch.device("cpu")
if cuda:
    torch.cuda.set_device(device)
dist.init_process_group("nccl" if cuda else "gloo")
torch.manual_seed(0)
model, shape = make(name, int(os.environ.get("BENCH_BATCH", "32")))
model = model.to(device)
grad_view = os.environ.get("BENCH_GRAD_VIEW") == "1"
ddp = DDP(model, bucket_cap_mb=cap, gradient_as_bucket_view=grad_view) if mode == "overlap" else model
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x, y = torch.randn(shape, device=device), torch.randint(0, 10, (shape[0],), device=device)
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=False)
    loss_fn(ddp(x), y).backward()
    opt.step()
    if cuda:
        torch.cuda.synchronize()


p50, p90 = time_steps(step, steps, before=dist.barrier)
if dist.get_rank() == 0:
    print(json.dumps({"impl": "pytorch-ddp" + ("-grad-view" if grad_view else ""), "model": name, "bucket_cap_mb": cap, "mode": mode,
                      "device": device.type, "batch": shape[0], "step_ms_p50": p50, "step_ms_p90": p90}))
dist.destroy_process_group()
