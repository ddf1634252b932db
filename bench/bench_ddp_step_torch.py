"""PyTorch DDP step time (the peer of bench_ddp_step). Started by ddprun
(torchrun's environment); rank 0 prints one JSON line.
usage: bench_ddp_step_torch.py <mlp|conv> <bucket_cap_mb> [steps]"""
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
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
model, shape = make(name)
ddp = DDP(model, bucket_cap_mb=cap)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=False)
    loss_fn(ddp(x), y).backward()
    opt.step()


p50, p90 = time_steps(step, steps, before=dist.barrier)
if dist.get_rank() == 0:
    print(json.dumps({"impl": "pytorch-ddp", "model": name, "bucket_cap_mb": cap, "mode": "overlap",
                      "step_ms_p50": p50, "step_ms_p90": p90}))
dist.destroy_process_group()
