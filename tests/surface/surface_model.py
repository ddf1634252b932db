"""The module and data of the training-surface tests (issue 24), shared by
the exporter and the PyTorch reference run.

TwoHeads takes two inputs (features x: N x 8, side s: N x 4) and returns a
dict {"logits": N x 3, "reg": N x 2}; it has a BatchNorm1d (buffers), a
dropout (seeded draws) and an exported method `embed(x)`. Generator and
Discriminator are a tiny GAN over the first 6 features of x."""
from typing import Dict

import torch
from torch import nn

N, FEATURES, SIDE, CLASSES, REG = 96, 8, 4, 3, 2
LATENT, REAL = 4, 6  # the GAN: noise z -> a fake of the first REAL features of x


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(FEATURES, 16)
        self.norm = nn.BatchNorm1d(16)
        self.side = nn.Linear(SIDE, 16)
        self.drop = nn.Dropout(0.25)
        self.cls = nn.Linear(16, CLASSES)
        self.reg = nn.Linear(16, REG)

    @torch.jit.export
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.body(x)))

    def forward(self, x: torch.Tensor, s: torch.Tensor) -> Dict[str, torch.Tensor]:
        h = self.drop(self.embed(x) + torch.tanh(self.side(s)))
        return {"logits": self.cls(h), "reg": self.reg(h)}


class Pair(nn.Module):
    """Returns a tuple: for reading outputs by index."""

    def forward(self, x: torch.Tensor, scale: float = 2.0):
        return x * scale, x.sum(dim=1)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LATENT, 16), nn.ReLU(), nn.Linear(16, REAL))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(REAL, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class NormNet(nn.Module):
    """Noise to the GAN's REAL features through a batch norm (buffers): the Join test's second model."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(LATENT, 8), nn.BatchNorm1d(8), nn.Linear(8, REAL))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.net(z)


def make_norm_net():
    torch.manual_seed(21)
    return NormNet()


def make_gan():
    torch.manual_seed(9)
    return Generator(), Discriminator()


def make_latent():
    return torch.randn(N, LATENT, generator=torch.Generator().manual_seed(13))


def make_model():
    torch.manual_seed(5)
    return TwoHeads()


def make_data():
    g = torch.Generator().manual_seed(11)
    x = torch.randn(N, FEATURES, generator=g)
    s = torch.randn(N, SIDE, generator=g)
    y = torch.randint(0, CLASSES, (N,), generator=g)
    y[::7] = -100  # some rows ignored (ignore_index)
    r = torch.randn(N, REG, generator=g)
    return x, s, y, r
