"""Saves bench_ddp_models.py's MLP, conv net and digits MLP (seed 0) as TorchScript for
bench_strategy_step.c.   export_bench_models.py <dir>"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ddp_models import make  # noqa: E402

for name in ("mlp", "conv", "digits"):
    torch.manual_seed(0)
    model, _ = make(name)
    torch.jit.script(model).save(os.path.join(sys.argv[1], name + ".pt"))
