"""Writes two_heads.pt (TwoHeads scripted), pair.pt (a tuple output), the
GAN's gen.pt and disc.pt, norm.pt (with a batch norm) and its state dict
norm_state.pt, and the data as raw little-endian files (x.f32,
s.f32, y.i64, r.f32, the GAN's noise z.f32) to OUT_DIR.
    export_surface.py OUT_DIR"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import Pair, make_data, make_gan, make_latent, make_model, make_norm_net  # noqa: E402

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
torch.jit.script(make_model()).save(os.path.join(out, "two_heads.pt"))
torch.jit.script(Pair()).save(os.path.join(out, "pair.pt"))
for name, t in zip(("x.f32", "s.f32", "y.i64", "r.f32"), make_data()):
    t.contiguous().numpy().tofile(os.path.join(out, name))
gen, disc = make_gan()
torch.jit.script(gen).save(os.path.join(out, "gen.pt"))
torch.jit.script(disc).save(os.path.join(out, "disc.pt"))
make_latent().numpy().tofile(os.path.join(out, "z.f32"))
norm = make_norm_net()
torch.jit.script(norm).save(os.path.join(out, "norm.pt"))
torch.save(norm.state_dict(), os.path.join(out, "norm_state.pt"))  # for the LibTorch model of native_job
