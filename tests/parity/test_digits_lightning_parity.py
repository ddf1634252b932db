"""The digits job through libddp's strategy (examples/c/train_digits.c)
against the same job under Lightning itself (bench/digits_lightning.py:
Trainer(strategy="ddp", accelerator="cpu", devices=2)): same initial
weights, data order, optimizer and model; rank 0's loss at every step must
agree to 1e-5 relative (they are bitwise equal with this wheel), and so must
the held-out accuracy. Also with a layer forward never uses, under
find_unused_parameters on both sides, with accumulate_grad_batches=2
(block_backward_sync on the batches that accumulate), and with PyTorch's
fp16 compression hook (on Lightning's DDP module, which Lightning itself
would hook on CUDA only), with gradient_as_bucket_view, with
precision="bf16-mixed" (autocast), with "16-mixed" (which both turn into
bf16-mixed on the CPU, with a warning), and with gradient clipping by norm
and by value, and with static_graph (also with a layer forward never uses), and with the
first layer frozen (requires_grad=False: not the DDP engine's, as in
PyTorch's DDP)."""
import os
import re
import shutil
import subprocess
import sys

import pytest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EPOCHS = 3  # 69 steps at 2 ranks


def run(cmd, env_extra):
    env = dict(os.environ, OMP_NUM_THREADS="1", **env_extra)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout + r.stderr


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """exported(dest, flags): examples/digits/export_digits.py's job with
    `flags` copied into a new directory `dest` (each run writes its
    checkpoint there); each set of flags is exported once (about 5 s)."""
    made = {}

    def copy(dest, flags=()):
        if tuple(flags) not in made:
            d = str(tmp_path_factory.mktemp("export"))
            subprocess.run([sys.executable, os.path.join(SRC, "examples", "digits", "export_digits.py"), d] + list(flags),
                           check=True, capture_output=True)
            made[tuple(flags)] = d
        shutil.copytree(made[tuple(flags)], dest)
        return dest

    return copy


def steps(path):
    with open(path) as f:
        return [float(line) for line in f if line.strip()]


def accuracy(out):
    m = re.search(r"held-out accuracy ([0-9.]+) \((\d+) of (\d+)\)", out)
    assert m, out
    return int(m.group(2))


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import sklearn"]).returncode != 0,
                    reason="scikit-learn is not installed (scripts/bootstrap.sh installs it)")
@pytest.mark.parametrize("variant", [[], ["--find-unused"], ["--accumulate", "2"], ["--comm-hook", "fp16"],
                                     ["--gradient-as-bucket-view"], ["--precision", "bf16-mixed"],
                                     ["--precision", "16-mixed"], ["--clip", "0.05"],
                                     ["--clip", "0.001", "--clip-algorithm", "value"], ["--static-graph"],
                                     ["--static-graph", "--find-unused"], ["--frozen"]],
                         ids=["plain", "find_unused_parameters", "accumulate_grad_batches_2", "fp16_compress_hook",
                              "gradient_as_bucket_view", "bf16_mixed", "16_mixed_on_cpu", "clip_norm", "clip_value",
                              "static_graph", "static_graph_with_an_unused_layer", "frozen_first_layer"])
def test_per_step_losses_match_lightning(tmp_path, exported, variant):
    data = exported(str(tmp_path / "digits"), (["--unused"] if "--find-unused" in variant else [])
                    + (["--frozen"] if "--frozen" in variant else []))
    train_digits = os.path.join(os.environ["DDP_BUILD"], "examples", "train_digits")
    # A frozen layer is the exported model's (train_digits takes no flag for it).
    ours = run([train_digits, data, "--world", "2", "--epochs", str(EPOCHS)] + [a for a in variant if a != "--frozen"],
               {"DIGITS_STEP_LOG": str(tmp_path / "ours")})
    theirs = run([sys.executable, os.path.join(SRC, "bench", "digits_lightning.py"), data, "--world", "2", "--epochs",
                  str(EPOCHS)] + variant, {"DIGITS_STEP_LOG": str(tmp_path / "lightning")})
    a, b = steps(tmp_path / "ours"), steps(tmp_path / "lightning")
    assert len(a) == len(b) == EPOCHS * 23
    worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    print(f"{len(a)} steps, {sum(x == y for x, y in zip(a, b))} bitwise equal, worst relative difference {worst:.3g}")
    assert worst <= 1e-5, list(zip(a, b))
    assert accuracy(ours) == accuracy(theirs)
    if "16-mixed" in variant:  # Lightning's rule on the CPU, told to the caller
        assert "using precision 'bf16-mixed' instead" in ours, ours


def two_nodes(cmd, env_extra):
    """cmd under two ddprun agents on this machine (--nnodes 2, one process
    each), as two nodes of one job; returns node 0's output."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    ddprun = os.path.join(os.environ["DDP_BUILD"], "tools", "ddprun")
    env = dict(os.environ, OMP_NUM_THREADS="1", **env_extra)
    agents = [subprocess.Popen([ddprun, "--nnodes", "2", "--node-rank", str(n), "--nproc-per-node", "1",
                                "--master-addr", "127.0.0.1", "--master-port", port, "--rdzv-id", "digits" + port]
                               + cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
              for n in (0, 1)]
    try:
        outs = [a.communicate(timeout=300)[0] for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
    assert [a.returncode for a in agents] == [0, 0], "\n".join(outs)
    return outs[0]


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import sklearn"]).returncode != 0,
                    reason="scikit-learn is not installed (scripts/bootstrap.sh installs it)")
def test_post_local_sgd_with_model_averaging_matches_lightning_on_two_nodes(tmp_path, exported):
    """Post-local SGD from step 10, the parameters averaged every 4 steps, on
    two nodes of one process each, so that each node's subgroup (libddp's
    hook with no subgroup given; PostLocalSGDState's per-node default) is
    smaller than the world and the replicas drift apart between averages.
    Lightning makes the averager itself (model_averaging_period) and would
    register the hook on CUDA only: the test registers PyTorch's hook on
    Lightning's DDP module (digits_lightning.py's PostLocalSgdHook)."""
    data = exported(str(tmp_path / "digits"))
    train_digits = os.path.join(os.environ["DDP_BUILD"], "examples", "train_digits")
    common = ["--world", "1", "--epochs", str(EPOCHS)]
    localsgd = ["--post-localsgd", "10", "--averaging-period", "4"]
    ours = two_nodes([train_digits, data, "--launcher", "popen"] + common + localsgd,
                     {"DIGITS_STEP_LOG": str(tmp_path / "ours")})
    theirs = two_nodes([sys.executable, os.path.join(SRC, "bench", "digits_lightning.py"), data, "--num-nodes", "2"]
                       + common + localsgd, {"DIGITS_STEP_LOG": str(tmp_path / "lightning")})
    two_nodes([train_digits, data, "--launcher", "popen"] + common, {"DIGITS_STEP_LOG": str(tmp_path / "plain")})
    a, b, plain = steps(tmp_path / "ours"), steps(tmp_path / "lightning"), steps(tmp_path / "plain")
    assert len(a) == len(b) == EPOCHS * 23
    worst = max(abs(x - y) / abs(y) for x, y in zip(a, b))
    print(f"{len(a)} steps, {sum(x == y for x, y in zip(a, b))} bitwise equal, worst relative difference {worst:.3g}")
    assert worst <= 1e-5, list(zip(a, b))
    assert accuracy(ours) == accuracy(theirs)
    # Local SGD took effect: plain DDP on the same job parts from it after step 10.
    assert a[:10] == plain[:10]
    assert sum(x != y for x, y in zip(a, plain)) > 20
