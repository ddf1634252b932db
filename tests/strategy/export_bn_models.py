"""Writes the TorchScript models the sync_batchnorm tests train:
bn1d.pt (Linear(6, 4) -> BatchNorm1d(4) -> ReLU, input (N, 6)) and
bn2d.pt (Conv2d(2, 3, 3, padding=1) -> BatchNorm2d(3) -> ReLU, input
(N, 2, 5, 5)), both by torch.jit.script, plus nobn.pt (Linear(6, 4) alone)
and bn1d_traced.pt (the 1d model by torch.jit.trace, in training mode).
    export_bn_models.py OUT_DIR"""
import os
import sys

import torch
from torch import nn

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.manual_seed(3)
bn1d = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.ReLU())
bn2d = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
with torch.no_grad():  # weights and biases of the norms away from 1 and 0
    for m in (bn1d[1], bn2d[1]):
        m.weight.uniform_(0.5, 1.5)
        m.bias.uniform_(-0.5, 0.5)
torch.jit.script(bn1d).save(os.path.join(out, "bn1d.pt"))
torch.jit.script(bn2d).save(os.path.join(out, "bn2d.pt"))
torch.jit.script(nn.Linear(6, 4)).save(os.path.join(out, "nobn.pt"))
torch.jit.trace(bn1d.train(), torch.randn(8, 6)).save(os.path.join(out, "bn1d_traced.pt"))
