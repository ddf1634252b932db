"""Writes two_heads.pt (TwoHeads scripted), pair.pt (a tuple output) and
the data as raw little-endian files (x.f32, s.f32, y.i64, r.f32) to OUT_DIR.
    export_surface.py OUT_DIR"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import Pair, make_data, make_model  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.jit.script(make_model()).save(os.path.join(out, "two_heads.pt"))
torch.jit.script(Pair()).save(os.path.join(out, "pair.pt"))
for name, t in zip(("x.f32", "s.f32", "y.i64", "r.f32"), make_data()):
    t.contiguous().numpy().tofile(os.path.join(out, name))
