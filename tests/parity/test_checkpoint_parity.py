"""Checkpoints and exported models against PyTorch and Lightning from the same
wheel, on the digits job (2 ranks, 4 epochs, the checkpoint after epoch 2):

- libddp's checkpoint resumes in Lightning (Trainer.fit(ckpt_path=...)), and
  Lightning's in libddp: the losses of the epochs after the resume equal the
  resuming side's uninterrupted run. SGD with momentum and a warmup-then-
  cosine schedule stepped per step: bitwise. AdamW: to 1e-5 relative, since
  LibTorch's AdamW updates its averages with mul and add where PyTorch's
  uses lerp, so the state the other side saved differs in the last bits.
- torch.load(weights_only=True) opens libddp's checkpoint with Lightning's keys.
- The model exported with ddp_strategy_save_module: torch.jit.load gives
  logits bitwise equal to libddp's forward on the held-out set, and the
  parameters libddp reads by name equal Python's state_dict().
- ddp_module_save_state_dict / load_state_dict against torch.save /
  load_state_dict, and state dicts with a missing, unexpected or mis-shaped
  entry, or a pickled object, refused by name (nothing in the file run)."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ddp_ctypes import Lib  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
BUILD = os.environ.get("DDP_BUILD", os.path.join(SRC, "build"))
TRAIN = os.path.join(BUILD, "examples", "train_digits")
LIGHTNING = os.path.join(SRC, "bench", "digits_lightning.py")
EPOCHS, STOP = 4, 2
STEPS_PER_EPOCH = 23  # 1437 samples, 2 ranks, batch 32

pytestmark = pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import sklearn, pytorch_lightning"]).returncode != 0,
                                reason="scikit-learn or pytorch_lightning is not installed (scripts/bootstrap.sh installs them)")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("digits"))
    subprocess.run([sys.executable, os.path.join(SRC, "examples", "digits", "export_digits.py"), d], check=True,
                   capture_output=True)
    return d


def run(cmd, log):
    env = dict(os.environ, OMP_NUM_THREADS="1", DIGITS_STEP_LOG=log)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(log) as f:
        return [float(line) for line in f if line.strip()]


def ours(data, tmp, tag, extra):
    return run([TRAIN, data, "--world", "2", "--epochs", str(EPOCHS)] + extra, str(tmp / f"ours_{tag}"))


def lightning(data, tmp, tag, extra):
    return run([sys.executable, LIGHTNING, data, "--world", "2", "--epochs", str(EPOCHS)] + extra,
               str(tmp / f"lightning_{tag}"))


def same(after, uninterrupted, exact):
    assert len(after) == len(uninterrupted) and len(after) == (EPOCHS - STOP) * STEPS_PER_EPOCH
    if exact:
        assert after == uninterrupted
    else:
        np.testing.assert_allclose(after, uninterrupted, rtol=1e-5)


VARIANTS = {"sgd_momentum_warmup_cosine": (["--warmup-cosine", "10"], True),
            "adamw_warmup_cosine": (["--optimizer", "adamw", "--warmup-cosine", "10"], False)}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_libddp_checkpoint_resumes_in_lightning(data, tmp_path, variant):
    extra, exact = VARIANTS[variant]
    ckpt = str(tmp_path / "libddp.ckpt")
    ours(data, tmp_path, "part", extra + ["--stop-after", str(STOP), "--ckpt", ckpt])
    c = torch.load(ckpt, weights_only=True)
    assert c["epoch"] == STOP and c["global_step"] == STOP * STEPS_PER_EPOCH
    assert set(c["state_dict"]) == {f"net.fc{i}.{w}" for i in (1, 2, 3) for w in ("weight", "bias")}
    assert len(c["optimizer_states"]) == 1 and len(c["lr_schedulers"]) == 1
    full = lightning(data, tmp_path, "full", extra)
    resumed = lightning(data, tmp_path, "resumed", extra + ["--resume", ckpt])
    same(resumed, full[STOP * STEPS_PER_EPOCH:], exact)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_lightning_checkpoint_resumes_in_libddp(data, tmp_path, variant):
    extra, exact = VARIANTS[variant]
    ckpt = str(tmp_path / "lightning.ckpt")
    lightning(data, tmp_path, "part", extra + ["--stop-after", str(STOP), "--save", ckpt])
    full = ours(data, tmp_path, "full", extra + ["--ckpt", str(tmp_path / "full.ckpt")])
    resumed = ours(data, tmp_path, "resumed", extra + ["--resume", "--ckpt", ckpt])
    same(resumed, full[STOP * STEPS_PER_EPOCH:], exact)


def test_exported_model_gives_libddps_logits_and_names(data, tmp_path):
    exported = str(tmp_path / "digits.pt")
    ours(data, tmp_path, "export", ["--epochs", "2", "--ckpt", str(tmp_path / "e.ckpt"), "--export", exported])
    lib = Lib()
    m = lib.module(exported)
    try:
        lib.check(lib.lib.ddp_module_train(m, 0), "train")
        python = torch.jit.load(exported)
        python.eval()
        state = lib.module_state(m)
        theirs = python.state_dict()
        assert list(state) == list(theirs)
        for k in state:
            assert torch.equal(state[k], theirs[k]), k
        x = torch.from_numpy(np.fromfile(os.path.join(data, "test_x.f32"), dtype=np.float32).reshape(-1, 64))
        with torch.no_grad():
            assert torch.equal(lib.forward(m, x), python(x))
        # The weights are the trained ones, not the initial ones.
        initial = torch.jit.load(os.path.join(data, "mlp.pt")).state_dict()
        assert not torch.equal(state["fc1.weight"], initial["fc1.weight"])
    finally:
        lib.lib.ddp_module_free(m)


def test_state_dict_in_and_out_and_bad_ones_named(data, tmp_path):
    lib = Lib()
    m = lib.module(os.path.join(data, "mlp.pt"))
    try:
        # Out: Python's load_state_dict(strict=True) takes it.
        out = str(tmp_path / "sd.pt")
        lib.check(lib.lib.ddp_module_save_state_dict(m, out.encode()), "save_state_dict")
        net = torch.jit.load(os.path.join(data, "mlp.pt"))
        net.load_state_dict(torch.load(out, weights_only=True), strict=True)
        # In: a state dict torch.save wrote, with changed weights.
        sd = {k: v + 1 for k, v in net.state_dict().items()}
        good = str(tmp_path / "good.pt")
        torch.save(sd, good)
        lib.check(lib.lib.ddp_module_load_state_dict(m, good.encode(), 1), "load_state_dict")
        assert torch.equal(lib.module_state(m)["fc2.bias"], sd["fc2.bias"])
        # Every tensor a view of one flat buffer (as tied or sliced weights
        # are saved): torch.save names the one storage once per tensor.
        flat = torch.cat([v.flatten() for v in sd.values()]) * 2
        views, at = {}, 0
        for k, v in sd.items():
            views[k] = flat[at:at + v.numel()].view_as(v)
            at += v.numel()
        shared = str(tmp_path / "shared.pt")
        torch.save(views, shared)
        lib.check(lib.lib.ddp_module_load_state_dict(m, shared.encode(), 1), "load_state_dict of views")
        state = lib.module_state(m)
        for k in views:
            assert torch.equal(state[k], views[k]), k
        lib.check(lib.lib.ddp_module_load_state_dict(m, good.encode(), 1), "load_state_dict")

        def refused(obj, strict, words):
            path = str(tmp_path / "bad.pt")
            torch.save(obj, path)
            rc = lib.lib.ddp_module_load_state_dict(m, path.encode(), strict)
            msg = lib.lib.ddp_last_error_message().decode()
            assert rc == -8, msg  # DDP_E_IO
            for w in words + [path]:
                assert w in msg, msg
            assert torch.equal(lib.module_state(m)["fc2.bias"], sd["fc2.bias"])  # untouched

        refused({k: v for k, v in sd.items() if k != "fc3.weight"}, 1, ["fc3.weight", "missing"])
        refused(dict(sd, extra=torch.ones(1)), 1, ["extra"])
        refused(dict(sd, **{"fc1.bias": torch.ones(3)}), 0, ["fc1.bias", "shape"])
        refused(dict(sd, **{"fc1.bias": sd["fc1.bias"].double()}), 1,
                ["'fc1.bias' was saved with shape [128] Double, the module has [128] Float"])
        marker = tmp_path / "ran"

        class Payload:
            def __reduce__(self):
                return (os.system, (f"touch {marker}",))

        refused(dict(sd, payload=Payload()), 0, ["posix.system", "nothing in the file is run"])
        assert not marker.exists()
    finally:
        lib.lib.ddp_module_free(m)
