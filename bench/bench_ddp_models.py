"""The benchmark models in PyTorch, identical to bench_ddp_step.cpp's, and
the step timing their Python benchmarks share."""
import os
import sys
import time

import torch
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                                 nn.Linear(2048, 1536), nn.ReLU(), nn.Linear(1536, 10))

    def forward(self, x):
        return self.net(x)


class MlpLarge(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                                 nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 1024), nn.ReLU(),
                                 nn.Linear(1024, 10))

    def forward(self, x):
        return self.net(x)


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, padding=1)
        self.c2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.c1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


def make(name, batch=32):
    if name == "digits":
        # The main job's model (examples/digits): MLP 64-128-64-10 on 8x8 images.
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "digits"))
        from export_digits import MLP
        return MLP(), (batch, 64)
    if name == "mlp":
        return Mlp(), (batch, 1024)
    if name == "mlp-large":
        return MlpLarge(), (batch, 1024)
    return Conv(), (batch, 3, 32, 32)


def time_steps(step, steps, before=None):
    """(p50, p90) in ms of `steps` timed calls of step(), after 3 untimed
    ones; before(), when given, runs untimed ahead of every call."""
    ms = []
    for s in range(steps + 3):
        if before:
            before()
        t0 = time.perf_counter()
        step()
        if s >= 3:
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return round(ms[len(ms) // 2], 3), round(ms[len(ms) * 9 // 10], 3)
