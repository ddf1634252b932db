"""The strategy's precision step against PyTorch's own pieces, from the same
wheel: torch.amp.GradScaler (scale sequence, growth tracker, skipped steps
on injected inf/NaN), torch.nn.utils.clip_grad_norm_ / clip_grad_value_
after unscaling, and torch.optim.SGD. build/tests/precision_trace runs
libddp's plugin over the same gradients; every figure must be equal."""
import os
import struct
import subprocess
import tempfile

import pytest
import torch

TRACE = os.path.join(os.environ.get("DDP_BUILD", "build"), "tests", "precision_trace")
SIZES = [7, 3, 12]


def gradients(steps, seed, bad_steps):
    gen = torch.Generator().manual_seed(seed)
    seq = []
    for k in range(steps):
        grads = [torch.randn(n, generator=gen) * 4000.0 for n in SIZES]
        if k in bad_steps:
            grads[k % len(SIZES)][k % 3] = float("inf") if k % 2 else float("nan")
        seq.append(grads)
    return seq


def reference(seq, algo, clip, growth_interval):
    params = [torch.ones(n, requires_grad=True) for n in SIZES]
    opt = torch.optim.SGD(params, lr=0.5)
    scaler = torch.amp.GradScaler("cpu", growth_interval=growth_interval)
    scaler.scale(torch.ones(()))  # makes the scale, as the first scaled loss does
    lines = []
    for k, grads in enumerate(seq):
        for p, g in zip(params, grads):
            p.grad = g.clone()
        scaler.unscale_(opt)
        if algo == "norm":
            torch.nn.utils.clip_grad_norm_(params, clip)
        elif algo == "value":
            torch.nn.utils.clip_grad_value_(params, clip)
        found = sum(v.item() for v in scaler._found_inf_per_device(opt).values())
        scaler.step(opt)
        scaler.update()
        lines.append((k, scaler.get_scale(), int(scaler._growth_tracker.item()), 0 if found else 1))
    return lines, [p.detach().tolist() for p in params]


def libddp(seq, algo, clip, growth_interval):
    with tempfile.NamedTemporaryFile(suffix=".bin", delete=False) as f:
        f.write(struct.pack("<qq", len(seq), len(SIZES)))
        f.write(struct.pack(f"<{len(SIZES)}q", *SIZES))
        for grads in seq:
            for g in grads:
                f.write(g.contiguous().numpy().tobytes())
        path = f.name
    try:
        out = subprocess.run([TRACE, path, algo, str(clip), str(growth_interval)], check=True,
                             capture_output=True, text=True, timeout=60).stdout
    finally:
        os.unlink(path)
    lines, params = [], []
    for line in out.splitlines():
        w = line.split()
        if w[0] == "step":
            lines.append((int(w[1]), float.fromhex(w[3]), int(w[5]), int(w[7])))
        else:
            params.append([float.fromhex(x) for x in w[2:]])
    return lines, params


@pytest.mark.parametrize("algo,clip", [("none", 0), ("norm", 0.5), ("norm", 1e9), ("value", 0.01)])
def test_scaler_clipping_and_step_equal_pytorch(algo, clip):
    if not os.path.exists(TRACE):
        pytest.skip(f"{TRACE} is not built")
    # Growth every 3 clean steps, so the scale both grows and backs off.
    seq = gradients(20, seed=7, bad_steps={2, 3, 9, 16})
    want_lines, want_params = reference(seq, algo, clip, growth_interval=3)
    got_lines, got_params = libddp(seq, algo, clip, growth_interval=3)
    assert got_lines == want_lines
    assert got_params == want_params
    assert any(s == 0 for *_, s in want_lines) and any(s == 1 for *_, s in want_lines)
    assert len({scale for _, scale, _, _ in want_lines}) > 2  # the scale moved both ways
