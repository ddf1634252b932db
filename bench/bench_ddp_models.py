"""The benchmark models in PyTorch, identical to bench_ddp_step.cpp's."""
import torch
import torch.nn as nn


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                                 nn.Linear(2048, 1536), nn.ReLU(), nn.Linear(1536, 10))

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


def make(name):
    if name == "mlp":
        return Mlp(), (32, 1024)
    return Conv(), (32, 3, 32, 32)
