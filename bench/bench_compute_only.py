"""The benchmark models' step without any distribution: one process, one
thread, plain PyTorch (forward, cross-entropy, backward, SGD): the compute
every DDP contender does as well. Prints one JSON line. With a TorchScript
file (export_bench_models.py's) the same step runs on that module instead,
in the same process after the eager one: libddp's strategy trains the
TorchScript module, whose own cost is then told apart from distribution's.
usage: bench_compute_only.py <mlp|conv> [steps] [model.pt]"""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp_models import make, time_steps  # noqa: E402

name = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 30
torch.set_num_threads(1)
torch.manual_seed(0)
model, shape = make(name)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(shape), torch.randint(0, 10, (shape[0],))
loss_fn = torch.nn.CrossEntropyLoss()


def step():
    opt.zero_grad(set_to_none=False)
    loss_fn(model(x), y).backward()
    opt.step()


p50, p90 = time_steps(step, steps)
print(json.dumps({"impl": "compute-only", "model": name, "step_ms_p50": p50, "step_ms_p90": p90}))
if len(sys.argv) > 3:
    model = torch.jit.load(sys.argv[3])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    p50, p90 = time_steps(step, steps)
    print(json.dumps({"impl": "compute-only-torchscript", "model": name, "step_ms_p50": p50, "step_ms_p90": p90}))
