"""Prepares the digits job: scikit-learn's 8x8 handwritten digits (the
digits.csv.gz the package ships), split 80/20 with a fixed seed, written as
raw little-endian arrays for the C program, and the MLP 64-128-64-10 as
TorchScript with seeded initial weights.

    export_digits.py OUT_DIR [--unused] [--batchnorm] [--frozen]
writes OUT_DIR/{train_x.f32, train_y.i64, test_x.f32, test_y.i64, mlp.pt}.
--unused adds a layer that forward never uses (the case for
find_unused_parameters); the other weights stay the same. --batchnorm puts
a BatchNorm1d after each hidden layer (the model for sync_batchnorm).
--frozen exports fc1 with requires_grad=False (fine-tuning with a frozen
first layer)."""
import os
import sys

import numpy as np
import torch
from sklearn.datasets import load_digits


class MLP(torch.nn.Module):
    def __init__(self, unused=False):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 128)
        self.fc2 = torch.nn.Linear(128, 64)
        self.fc3 = torch.nn.Linear(64, 10)
        if unused:
            self.aux = torch.nn.Linear(64, 10)  # never used by forward

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.fc3(x)


class MLPWithBatchNorm(MLP):
    """The same MLP (same initial weights) with a BatchNorm1d after each hidden layer."""

    def __init__(self, unused=False):
        super().__init__(unused)
        self.bn1 = torch.nn.BatchNorm1d(128)
        self.bn2 = torch.nn.BatchNorm1d(64)

    def forward(self, x):
        x = torch.relu(self.bn1(self.fc1(x)))
        x = torch.relu(self.bn2(self.fc2(x)))
        return self.fc3(x)


def split(seed=0):
    """The digits, scaled to [0, 1], and the 80/20 split (same for every run)."""
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.8 * len(y))
    return x[order[:cut]], y[order[:cut]], x[order[cut:]], y[order[cut:]]


def model(seed=0, unused=False, batchnorm=False):
    torch.manual_seed(seed)
    return MLPWithBatchNorm(unused) if batchnorm else MLP(unused)


def main(out, unused=False, batchnorm=False, frozen=False):
    os.makedirs(out, exist_ok=True)
    train_x, train_y, test_x, test_y = split()
    for name, a in [("train_x.f32", train_x), ("train_y.i64", train_y), ("test_x.f32", test_x), ("test_y.i64", test_y)]:
        a.tofile(os.path.join(out, name))
    net = model(unused=unused, batchnorm=batchnorm)
    if frozen:
        net.fc1.requires_grad_(False)
    torch.jit.script(net).save(os.path.join(out, "mlp.pt"))
    print(f"digits: {len(train_y)} training and {len(test_y)} held-out samples, MLP 64-128-64-10 in {out}")


if __name__ == "__main__":
    main(sys.argv[1], unused="--unused" in sys.argv[2:], batchnorm="--batchnorm" in sys.argv[2:],
         frozen="--frozen" in sys.argv[2:])
