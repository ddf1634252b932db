"""The training surface of issue 24 against PyTorch and Lightning from the
same wheel.

- surface_job (C, 2 ranks, tests/surface/) against surface_reference.py
  (PyTorch DDP over Gloo and Lightning's own classes): a two-input module
  with a dict output, a composite loss written with the C arithmetic
  (cross entropy with weight, ignore_index and label_smoothing, + 0.1 x
  MSE), SGD in two parameter groups chosen by name (no weight decay and
  another rate on biases and the norm), dropout seeded by
  seed_everything(42): every step's loss is bitwise PyTorch DDP's, and the
  checkpoint's optimizer state is PyTorch's state_dict (groups, indices,
  hyper-parameters, momentum buffers bitwise). Then evaluation without gradients, 3 batches on
  rank 0 and 1 on rank 1 (no collective, so no hang), a named method, and
  the evaluation loss as a metric: local and sync_dist values bitwise
  Lightning's _ResultCollection.
- gan_job (C): two modules, each with its own engine, and two optimizers in
  one strategy, a GAN step in DCGAN's order: both losses every step
  bitwise PyTorch DDP's with one DistributedDataParallel per module.
- join_job (C): uneven batches and ddp_strategy_join, bitwise PyTorch's
  Join (losses, final state), with and without divide_by_initial_world_size.
- Each loss of ddp_loss_compute with its arguments, and the arithmetic,
  against torch.nn.functional and torch: values and input gradients.
- ddp_seed_everything(42) then dropout: the masks torch.manual_seed(42)
  gives (whatever was drawn before).
"""
import ctypes
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
SURFACE = os.path.join(HERE, "..", "surface")
sys.path.insert(0, HERE)
from ddp_ctypes import Lib  # noqa: E402
from parity_launch import free_port  # noqa: E402

BUILD = os.environ.get("DDP_BUILD", os.path.join(HERE, "..", "..", "build"))
JOB = os.path.join(BUILD, "tests", "surface_job")
lightning = pytest.importorskip("pytorch_lightning")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("surface"))
    subprocess.run([sys.executable, os.path.join(SURFACE, "export_surface.py"), d], check=True)
    return d


def lines_by_rank(text):
    """{rank: [(what..., value)]}: C's %a and Python's float.hex print the same value differently."""
    out = {}
    for line in text.splitlines():
        if line.startswith("rank "):
            words = line.split()
            out.setdefault(words[1], []).append((*words[2:-1], float.fromhex(words[-1])))
    return out


def reference(out_dir, world=2, steps=12, script="surface_reference.py", args=None, env=None):
    """The lines of `script` run on `world` ranks of PyTorch over Gloo (args: STEPS OUT unless given)."""
    port = free_port()
    argv = [sys.executable, os.path.join(SURFACE, script)] + (args if args is not None else [str(steps), out_dir])
    procs = [subprocess.Popen(argv, env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(world), TORCH_PORT=str(port),
                                             OMP_NUM_THREADS="1", **(env or {})),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(world)]
    outs = []
    for p in procs:
        o, e = p.communicate(timeout=300)
        assert p.returncode == 0, e
        outs.append(o)
    return lines_by_rank("\n".join(outs))


@pytest.mark.parametrize("backend", ["shm", "gloo"])
def test_two_inputs_dict_outputs_composite_loss_eval_and_metric_equal_pytorch_and_lightning(data, backend):
    job = subprocess.run([JOB, data, "12"], capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, OMP_NUM_THREADS="1", SURFACE_BACKEND=backend))
    assert job.returncode == 0, job.stderr + job.stdout
    mine, theirs = lines_by_rank(job.stdout), reference(data)
    for rank in ("0", "1"):
        assert mine[rank] == theirs[rank], f"rank {rank}:\nlibddp:  {mine[rank]}\nPyTorch: {theirs[rank]}"
    saved = torch.load(os.path.join(data, "surface.ckpt"), weights_only=True)["optimizer_states"][0]
    ref = torch.load(os.path.join(data, "ref_optimizer.pt"), weights_only=True)
    assert saved["param_groups"] == ref["param_groups"]
    assert saved["state"].keys() == ref["state"].keys()
    for i, buffers in ref["state"].items():
        assert torch.equal(saved["state"][i]["momentum_buffer"], buffers["momentum_buffer"]), i
    # Uneven evaluation: 3 batches on rank 0, one on rank 1.
    assert sum(l[0] == "eval" and l[2] == "loss" for l in mine["0"]) == 3
    assert sum(l[0] == "eval" and l[2] == "loss" for l in mine["1"]) == 1


def test_two_modules_with_two_optimizers_a_gan_step_equals_pytorch_ddp(data):
    job = subprocess.run([os.path.join(BUILD, "tests", "gan_job"), data, "10"], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert job.returncode == 0, job.stderr + job.stdout
    theirs = reference(data, steps=10, script="gan_reference.py")
    mine = {}
    for rank, lines in lines_by_rank(job.stdout).items():
        mine[rank] = [l for l in lines if l[0] == "gan"]
        assert [l for l in lines if l[0] == "reload"] == [("reload", 0.0)], lines  # read back equal
    for rank in ("0", "1"):
        assert len(mine[rank]) == 20
        assert mine[rank] == theirs[rank], f"rank {rank}:\nlibddp:  {mine[rank]}\nPyTorch: {theirs[rank]}"
    # Both modules in one state_dict under their prefixes, both optimizers in Lightning's list.
    saved = torch.load(os.path.join(data, "gan.ckpt"), weights_only=True)
    ref = torch.load(os.path.join(data, "ref_gan.pt"), weights_only=True)
    expected = {f"{who}.{k}": v for who in ("generator", "discriminator") for k, v in ref[who].items()}
    assert saved["state_dict"].keys() == expected.keys()
    for k, v in expected.items():
        assert torch.equal(saved["state_dict"][k], v), k
    assert len(saved["optimizer_states"]) == 2
    for got, want in zip(saved["optimizer_states"], (ref["opt_g"], ref["opt_d"])):
        assert got["param_groups"] == want["param_groups"]
        for i, buffers in want["state"].items():
            for name, t in buffers.items():
                if t is not None:
                    assert torch.equal(got["state"][i][name], t), (i, name)


@pytest.mark.parametrize("hook", ["powersgd", "batched"])
def test_powersgd_resumed_from_a_checkpoint_compresses_as_an_uninterrupted_run(data, hook):
    """16 steps with PowerSGD (rank 1 from step 3, error feedback, warm
    start) against 8 steps, a checkpoint, a new job that resumes from it and
    runs the other 8: each step's loss and synchronised-gradient checksum
    are bitwise equal (every rank's residual, the P/Q memories, the step
    count and the seed stream travel in the checkpoint)."""
    def run(**env):
        r = subprocess.run([JOB, data, "16"], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, OMP_NUM_THREADS="1", SURFACE_HOOK=hook, **env))
        assert r.returncode == 0, r.stderr + r.stdout
        return lines_by_rank(r.stdout)

    whole = run()
    first, second = run(SURFACE_STOP_AT="8"), run(SURFACE_RESUME="1")
    for rank in ("0", "1"):
        assert len(whole[rank]) == 32
        assert first[rank] + second[rank] == whole[rank], rank
    saved = torch.load(os.path.join(data, "hook.ckpt"), weights_only=True)["libddp"]["comm_hook"]
    assert len(saved) == 2 and saved[0]["iter"] == 8
    assert not torch.equal(saved[0]["buckets"][0]["error"], saved[1]["buckets"][0]["error"])  # each rank its own


def hook_job_on_a_copy(data, tmp_path, hook):
    """A copy of the exported data (the job writes its hook.ckpt there) and
    a runner of the 16-step hook job on it: run(**env) -> CompletedProcess."""
    import shutil
    own = str(tmp_path / "data")
    shutil.copytree(data, own)

    def run(**env):
        return subprocess.run([JOB, own, "16"], capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, OMP_NUM_THREADS="1", SURFACE_HOOK=hook, **env))
    return own, run


@pytest.mark.parametrize("hook", ["powersgd", "batched"])
def test_a_resumed_powersgd_memory_that_does_not_fit_its_bucket_is_refused_by_name(data, hook, tmp_path):
    """A checkpoint whose PowerSGD memories do not fit the buckets (saved
    with other buckets: another bucket_cap_mb or model; here made so by
    editing the saved state) ends the resumed run with DDP_E_IO naming the
    memory, the bucket and both shapes, on the rank whose memory it is. A
    residual of one element was broadcast into the bucket without a word,
    and a P memory larger than the bucket needs was narrowed to it."""
    own, run = hook_job_on_a_copy(data, tmp_path, hook)

    assert run(SURFACE_STOP_AT="8").returncode == 0
    ckpt = os.path.join(own, "hook.ckpt")
    saved = torch.load(ckpt, weights_only=True)
    memory = saved["libddp"]["comm_hook"][1]["buckets"][0]
    error_shape, p_shape = list(memory["error"].shape), list(memory["p"].shape)
    for what, value, shape in (("error", torch.ones(1), error_shape), ("p", torch.ones(*p_shape[:-1], p_shape[-1] + 2), p_shape)):
        edited = torch.load(ckpt, weights_only=True)
        edited["libddp"]["comm_hook"][1]["buckets"][0][what] = value  # rank 1's
        torch.save(edited, os.path.join(own, "hook.ckpt"))
        r = run(SURFACE_RESUME="1")
        torch.save(saved, ckpt)
        assert r.returncode != 0, r.stdout
        kind = "batched PowerSGD" if hook == "batched" else "PowerSGD"
        words = (f"comm hook state: {kind}'s '{what}' of bucket 0 has shape {list(value.shape)}, this bucket needs "
                 f"{shape} (were these memories made for other buckets: a checkpoint")
        assert words in r.stderr and "(status -8)" in r.stderr, r.stderr


def test_a_saved_step_count_that_the_next_steps_would_overflow_is_refused(data, tmp_path):
    """A comm hook's iteration or the model averager's step past 2^62 in a
    checkpoint (a damaged or hostile file: Python's ints do not overflow,
    int64 does) is DDP_E_IO at the load. A PowerSGD iteration of 2^63 - 1
    loaded, and the first step's increment overflowed (undefined
    behaviour): the run went on with other gradients than the resumed
    run's from its first step."""
    own, run = hook_job_on_a_copy(data, tmp_path, "powersgd")

    assert run(SURFACE_STOP_AT="8").returncode == 0
    ckpt = os.path.join(own, "hook.ckpt")
    saved = torch.load(ckpt, weights_only=True)
    most = 2**63 - 1

    def hook_iter(ck):
        for state in ck["libddp"]["comm_hook"]:
            state["iter"] = most

    def averager_step(ck):
        ck["libddp"]["model_averager_step"] = most

    for edit, words in ((hook_iter, f"comm hook state: PowerSGD's 'iter' {most} is out of range (at most 2^62)"),
                        (averager_step, "libddp's 'model_averager_step' is not a step count (0 to 2^62)")):
        edited = torch.load(ckpt, weights_only=True)
        edit(edited)
        torch.save(edited, ckpt)
        r = run(SURFACE_RESUME="1")
        torch.save(saved, ckpt)
        assert r.returncode != 0, r.stdout
        assert words in r.stderr and "(status -8)" in r.stderr, r.stderr


@pytest.mark.parametrize("divide", ["1", "0"])
@pytest.mark.parametrize("model", ["gen.pt", "norm.pt"])
def test_join_with_uneven_batches_equals_pytorchs_join(data, model, divide):
    """6 batches on rank 0, 4 on rank 1, then join: every step's loss and
    the final state on both ranks (the last joiner's) bitwise PyTorch's Join,
    with divide_by_initial_world_size on and off, without and with buffers
    (a batch norm's, broadcast from the highest rank still training)."""
    job = subprocess.run([os.path.join(BUILD, "tests", "join_job"), data, model], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1", JOIN_DIVIDE=divide))
    assert job.returncode == 0, job.stderr + job.stdout
    mine = lines_by_rank(job.stdout)
    theirs = reference(data, script="join_reference.py", args=[model], env={"JOIN_DIVIDE": divide})
    assert len(mine["0"]) == 7 and len(mine["1"]) == 5
    assert mine == theirs
    assert mine["0"][-1] == mine["1"][-1]  # one model after the join


def native_job(data, precision, *extra):
    job = subprocess.run([os.path.join(BUILD, "tests", "native_job"), data, precision, *extra], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert job.returncode == 0, job.stderr + job.stdout
    return lines_by_rank(job.stdout)


def joined(*runs):
    return {rank: sum((run[rank] for run in runs), []) for rank in runs[0]}


@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_a_libtorch_module_and_optimizer_under_the_strategy_equal_pytorch_ddp_through_a_resume(data, precision):
    """tests/torch/native_job.cpp: a torch::nn::Module (Linear, BatchNorm1d,
    Linear) and its own torch::optim::SGD (momentum) under ddp::Strategy,
    run by its own forward, 10 steps on 2 ranks, a checkpoint, then 10 more
    steps in a new job resumed from it: every loss bitwise PyTorch DDP's 20
    uninterrupted steps on the Python module with the same names and
    weights, each rank's running statistics too (rank 0's broadcast before
    each forward). The checkpoint holds the state after step 10: the
    state_dict under "model." and the optimizer's state_dict (momentum
    buffers bitwise, param_groups equal as dicts). Across frameworks in both
    directions: PyTorch resumed from the C++ checkpoint, and the C++ job
    from the one PyTorch wrote in Lightning's layout, continue with the
    uninterrupted run's losses."""
    theirs = reference(data, script="native_reference.py", args=[data, precision])
    first = native_job(data, precision)
    assert len(first["0"]) == 11  # 10 losses and the running statistics
    ckpt = os.path.join(data, "native.ckpt")
    resumed = native_job(data, precision, "--resume", ckpt)
    assert joined(first, resumed) == theirs

    saved = torch.load(ckpt, weights_only=True)
    ref = torch.load(os.path.join(data, "native_ref.pt"), weights_only=True)
    assert saved["state_dict"].keys() == {"model." + k for k in ref}
    for k, v in ref.items():
        assert torch.equal(saved["state_dict"]["model." + k], v), k
    ref_opt = torch.load(os.path.join(data, "native_ref_opt.pt"), weights_only=True)
    mine_opt = saved["optimizer_states"][0]
    assert mine_opt["param_groups"] == ref_opt["param_groups"]
    assert mine_opt["state"].keys() == ref_opt["state"].keys() and len(ref_opt["state"]) == 6
    for i, buffers in ref_opt["state"].items():
        assert torch.equal(mine_opt["state"][i]["momentum_buffer"], buffers["momentum_buffer"]), i

    # PyTorch resumed from the C++ checkpoint, the C++ job from PyTorch's.
    pytorch_resumed = reference(data, script="native_reference.py", args=[data, precision, "--resume", ckpt])
    assert joined(first, pytorch_resumed) == theirs
    cpp_resumed = native_job(data, precision, "--resume", os.path.join(data, "native_py.ckpt"))
    assert joined(first, cpp_resumed) == theirs


def lightning_native(data, precision, mode, ckpt):
    job = subprocess.run([sys.executable, os.path.join(SURFACE, "native_lightning.py"), data, precision, mode, ckpt],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert job.returncode == 0, job.stderr + job.stdout
    return lines_by_rank(job.stdout)


def losses_from(lines, first):
    return {rank: [e for e in v if e[0] == "step" and int(e[1]) >= first] for rank, v in lines.items()}


@pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import pytorch_lightning"]).returncode != 0,
                    reason="pytorch_lightning is not installed (scripts/bootstrap.sh installs it)")
@pytest.mark.parametrize("precision", ["32-true", "bf16-mixed"])
def test_a_libtorch_modules_checkpoint_resumes_in_lightning_and_lightnings_in_the_cpp_job(data, precision):
    """The C++ job's checkpoint after step 10 (tests/torch/native_job.cpp)
    resumes in Lightning's Trainer.fit(ckpt_path=...) on the same module
    (tests/surface/native_lightning.py: Trainer(strategy="ddp"), 2 ranks over
    Gloo, the Trainer's precision), and the checkpoint Lightning's
    trainer.save_checkpoint writes after 10 steps resumes in the C++ job:
    both continue with the losses of PyTorch DDP's uninterrupted run
    (bitwise), so the model, the momentum buffers and the step count all
    crossed over."""
    theirs = losses_from(reference(data, script="native_reference.py", args=[data, precision]), 10)
    assert [len(v) for v in theirs.values()] == [10, 10]
    native_job(data, precision)
    in_lightning = lightning_native(data, precision, "--resume", os.path.join(data, "native.ckpt"))
    assert losses_from(in_lightning, 0) == theirs
    saved = os.path.join(data, f"native_lightning_{precision}.ckpt")
    first = lightning_native(data, precision, "--save", saved)
    assert [len(v) for v in losses_from(first, 0).values()] == [10, 10]
    assert torch.load(saved, weights_only=True)["global_step"] == 10
    assert losses_from(native_job(data, precision, "--resume", saved), 0) == theirs


def lib():
    L = Lib()
    vp = ctypes.c_void_p
    L.lib.ddp_loss_compute.argtypes = [ctypes.POINTER(LossOptions), vp, vp, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_set_requires_grad.argtypes = [vp, ctypes.c_int]
    L.lib.ddp_tensor_backward.argtypes = [vp]
    L.lib.ddp_tensor_grad.argtypes = [vp, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_binary.argtypes = [ctypes.c_int, vp, vp, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_binary_scalar.argtypes = [ctypes.c_int, vp, ctypes.c_double, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_unary.argtypes = [ctypes.c_int, vp, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_softmax.argtypes = [vp, ctypes.c_int64, ctypes.c_int, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_sum.argtypes = [vp, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(vp)]
    L.lib.ddp_tensor_mean.argtypes = L.lib.ddp_tensor_sum.argtypes
    L.lib.ddp_seed_everything.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    return L


class LossOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("kind", ctypes.c_int), ("reduction", ctypes.c_int),
                ("weight", ctypes.c_void_p), ("ignore_index", ctypes.c_int64), ("label_smoothing", ctypes.c_double),
                ("pos_weight", ctypes.c_void_p), ("beta", ctypes.c_double), ("delta", ctypes.c_double),
                ("log_target", ctypes.c_int)]


MSE, CE, BCE, L1, SMOOTH_L1, HUBER, NLL, KL = range(8)
REDUCTIONS = {"mean": 0, "sum": 1, "none": 2, "batchmean": 3}


def leaf(L, t):
    """A libddp tensor over t's memory (t must stay alive) that requires grad."""
    h = L.wrap(t)
    L.check(L.lib.ddp_tensor_set_requires_grad(h, 1), "requires_grad")
    return h


def grad_of(L, h, like):
    g = ctypes.c_void_p()
    L.check(L.lib.ddp_tensor_grad(h, ctypes.byref(g)), "grad")
    assert g.value, "no gradient"
    out = L.to_torch(g, like.dtype).reshape(like.shape).clone()
    L.lib.ddp_tensor_free(g)
    return out


def run_loss(L, kind, x, y, reduction="mean", **kw):
    o = LossOptions(1, kind, REDUCTIONS[reduction], None, kw.get("ignore_index", -100), kw.get("label_smoothing", 0.0),
                    None, kw.get("beta", 1.0), kw.get("delta", 1.0), int(kw.get("log_target", False)))
    keep = []
    for field in ("weight", "pos_weight"):
        if field in kw:
            keep.append(L.wrap(kw[field]))
            setattr(o, field, keep[-1])
    xc = x.clone()  # kept alive: the handle views its memory
    hx, hy = leaf(L, xc), L.wrap(y)
    out = ctypes.c_void_p()
    L.check(L.lib.ddp_loss_compute(ctypes.byref(o), hx, hy, ctypes.byref(out)), "loss")
    value = L.to_torch(out, torch.float32).clone()
    total = ctypes.c_void_p()
    L.check(L.lib.ddp_tensor_sum(out, None, 0, 0, ctypes.byref(total)), "sum")
    L.check(L.lib.ddp_tensor_backward(total), "backward")
    g = grad_of(L, hx, x)
    for h in [hx, hy, out, total] + keep:
        L.lib.ddp_tensor_free(h)
    return value, g


def torch_loss(fn, x, y, **kw):
    xl = x.clone().requires_grad_()
    v = fn(xl, y, **kw)
    v.sum().backward()
    return v.detach().reshape(-1), xl.grad


def loss_cases():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 4, generator=g)
    idx = torch.tensor([0, 3, 1, -100, 2, 3])
    probs = torch.softmax(torch.randn(6, 4, generator=g), 1)
    xs, ys = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    bin_t = (torch.rand(5, 3, generator=g) > 0.5).float()
    w = torch.tensor([1.0, 0.5, 2.0, 1.5])
    return [
        (CE, F.cross_entropy, logits, idx, dict(weight=w, ignore_index=-100, label_smoothing=0.2)),
        (CE, F.cross_entropy, logits, idx, dict(reduction="sum", ignore_index=-100)),
        (CE, F.cross_entropy, logits, idx, dict(reduction="none", ignore_index=-100, label_smoothing=0.1)),
        (CE, F.cross_entropy, logits, probs, dict(label_smoothing=0.05)),
        (BCE, F.binary_cross_entropy_with_logits, xs, bin_t, dict(pos_weight=torch.tensor([1.0, 3.0, 0.5]))),
        (BCE, F.binary_cross_entropy_with_logits, xs, bin_t, dict(weight=torch.tensor([2.0, 1.0, 1.0]), reduction="sum")),
        (L1, F.l1_loss, xs, ys, {}),
        (SMOOTH_L1, F.smooth_l1_loss, xs, ys, dict(beta=0.5)),
        (HUBER, F.huber_loss, xs, ys, dict(delta=0.7, reduction="none")),
        (NLL, F.nll_loss, torch.log_softmax(logits, 1), idx, dict(weight=w, ignore_index=-100)),
        (KL, F.kl_div, torch.log_softmax(logits, 1), probs, dict(reduction="batchmean")),
        (KL, F.kl_div, torch.log_softmax(logits, 1), torch.log(probs), dict(reduction="sum", log_target=True)),
        (MSE, F.mse_loss, xs, ys, dict(reduction="none")),
    ]


@pytest.mark.parametrize("case", range(len(loss_cases())))
def test_each_loss_with_its_arguments_equals_torch_functional(case):
    kind, fn, x, y, kw = loss_cases()[case]
    L = lib()
    v, g = run_loss(L, kind, x, y, **kw)
    tv, tg = torch_loss(fn, x, y, **kw)
    assert torch.equal(v.reshape(-1), tv), (v, tv)
    assert torch.equal(g, tg), (g, tg)


def test_arithmetic_keeps_the_graph_and_equals_torch():
    L = lib()
    g = torch.Generator().manual_seed(2)
    a, b = torch.rand(3, 4, generator=g) + 0.5, torch.rand(4, generator=g) + 0.5
    ac, bc = a.clone(), b.clone()  # kept alive: the handles view their memory
    ha, hb = leaf(L, ac), leaf(L, bc)
    vp = ctypes.c_void_p
    made = []

    def bin_(op, x, y):
        o = vp()
        L.check(L.lib.ddp_tensor_binary(op, x, y, ctypes.byref(o)), "binary")
        made.append(o)
        return o

    def sca(op, x, k):
        o = vp()
        L.check(L.lib.ddp_tensor_binary_scalar(op, x, k, ctypes.byref(o)), "scalar")
        made.append(o)
        return o

    def un(op, x):
        o = vp()
        L.check(L.lib.ddp_tensor_unary(op, x, ctypes.byref(o)), "unary")
        made.append(o)
        return o

    def mean(x, dims=None):
        o = vp()
        d = (ctypes.c_int64 * len(dims))(*dims) if dims else None
        L.check(L.lib.ddp_tensor_mean(x, d, len(dims) if dims else 0, 0, ctypes.byref(o)), "mean")
        made.append(o)
        return o

    ADD, SUB, MUL, DIV, POW, MAXIMUM, MINIMUM = range(7)
    NEG, EXP, LOG, SQRT, ABS, SQUARE, RELU, SIGMOID, TANH, LOG1P, SIN, COS = range(12)
    # ((a * b - a / b) ** 2 + exp(-a) * log(a) + sqrt(b) + tanh(sigmoid(a)) + clamp(a, min=0.7)).mean(dim 1).mean()
    t1 = sca(POW, bin_(SUB, bin_(MUL, ha, hb), bin_(DIV, ha, hb)), 2.0)
    t2 = bin_(MUL, un(EXP, un(NEG, ha)), un(LOG, ha))
    t3 = bin_(ADD, bin_(ADD, t1, t2), un(SQRT, hb))
    t4 = bin_(ADD, t3, un(TANH, un(SIGMOID, ha)))
    t5 = bin_(ADD, t4, sca(MAXIMUM, ha, 0.7))
    total = mean(mean(t5, [1]))
    L.check(L.lib.ddp_tensor_backward(total), "backward")
    ta, tb = a.clone().requires_grad_(), b.clone().requires_grad_()
    expect = ((ta * tb - ta / tb) ** 2 + torch.exp(-ta) * torch.log(ta) + torch.sqrt(tb)
              + torch.tanh(torch.sigmoid(ta)) + torch.clamp(ta, min=0.7)).mean(dim=1).mean()
    expect.backward()
    assert torch.equal(L.to_torch(total, torch.float32).reshape(()), expect.detach())
    assert torch.equal(grad_of(L, ha, a), ta.grad)
    assert torch.equal(grad_of(L, hb, b), tb.grad)
    for h in made + [ha, hb]:
        L.lib.ddp_tensor_free(h)


def test_seed_everything_gives_torch_manual_seeds_dropout_masks(data):
    L = lib()
    vp = ctypes.c_void_p
    L.lib.ddp_module_call.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(vp), ctypes.c_size_t, ctypes.POINTER(vp)]
    L.lib.ddp_outputs_get.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(vp)]
    L.lib.ddp_outputs_free.argtypes = [vp]
    path = os.path.join(data, "two_heads.pt")
    x, s = torch.randn(32, 8), torch.randn(32, 4)
    python_module = torch.jit.load(path).train()
    torch.manual_seed(42)
    expected = python_module(x, s)["logits"]
    torch.rand(1000)  # the generator moved on
    used = ctypes.c_int64()
    L.check(L.lib.ddp_seed_everything(42, 0, ctypes.byref(used)), "seed")
    assert used.value == 42
    # The module's dropout run from C draws what torch.manual_seed(42) drew.
    m = L.module(path)
    inputs = (vp * 2)(L.wrap(x), L.wrap(s))
    out, logits = vp(), vp()
    L.check(L.lib.ddp_module_call(m, b"forward", inputs, 2, ctypes.byref(out)), "call")
    L.check(L.lib.ddp_outputs_get(out, b"logits", ctypes.byref(logits)), "logits")
    got = L.to_torch(logits, torch.float32).reshape(expected.shape)
    assert torch.equal(got, expected.detach())
    # Without the seed, the draws differ (the comparison above can fail).
    L.lib.ddp_tensor_free(logits)
    L.lib.ddp_outputs_free(out)
    L.check(L.lib.ddp_module_call(m, b"forward", inputs, 2, ctypes.byref(out)), "call")
    L.check(L.lib.ddp_outputs_get(out, b"logits", ctypes.byref(logits)), "logits")
    assert not torch.equal(L.to_torch(logits, torch.float32).reshape(expected.shape), expected.detach())
    for h in (logits, inputs[0], inputs[1]):
        L.lib.ddp_tensor_free(h)
    L.lib.ddp_outputs_free(out)
    L.lib.ddp_module_free(m)


def test_seed_everything_refuses_out_of_bounds_seeds_like_lightning():
    L = lib()
    assert L.lib.ddp_seed_everything(2 ** 32, 0, None) != 0
    assert b"not in bounds" in L.lib.ddp_last_error_message()


def test_nonstrict_state_dict_loading_skips_and_names_what_pytorch_does(data, tmp_path):
    L = lib()
    vp = ctypes.c_void_p
    L.lib.ddp_module_load_state_dict_nonstrict.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(vp)]
    L.lib.ddp_buffer_data.argtypes = [vp]
    L.lib.ddp_buffer_data.restype = vp
    L.lib.ddp_buffer_size.argtypes = [vp]
    L.lib.ddp_buffer_size.restype = ctypes.c_size_t
    L.lib.ddp_buffer_free.argtypes = [vp]
    path = os.path.join(data, "two_heads.pt")
    # A state dict from another version of the model: the regression head
    # gone, an extra head added, the rest changed.
    sd = {k: v + 1 for k, v in torch.jit.load(path).state_dict().items() if not k.startswith("reg.")}
    sd["extra.weight"] = torch.zeros(2, 2)
    f = str(tmp_path / "partial.pt")
    torch.save(sd, f)
    python_module = torch.jit.load(path)
    result = python_module.load_state_dict(torch.load(f, weights_only=True), strict=False)
    m = L.module(path)
    report = vp()
    L.check(L.lib.ddp_module_load_state_dict_nonstrict(m, f.encode(), ctypes.byref(report)), "nonstrict")
    text = ctypes.string_at(L.lib.ddp_buffer_data(report), L.lib.ddp_buffer_size(report)).decode()
    L.lib.ddp_buffer_free(report)
    missing = [l.split(" ", 1)[1] for l in text.splitlines() if l.startswith("missing ")]
    unexpected = [l.split(" ", 1)[1] for l in text.splitlines() if l.startswith("unexpected ")]
    assert sorted(missing) == sorted(result.missing_keys) and missing
    assert sorted(unexpected) == sorted(result.unexpected_keys) == ["extra.weight"]
    mine = L.module_state(m)
    for k, v in python_module.state_dict().items():
        if v.dtype == torch.float32:
            assert torch.equal(mine[k].reshape(v.shape), v), k
    # A shape that differs is still refused, and nothing changes.
    sd["cls.weight"] = torch.zeros(5, 5)
    torch.save(sd, f)
    assert L.lib.ddp_module_load_state_dict_nonstrict(m, f.encode(), None) == -8  # DDP_E_IO
    assert b"'cls.weight' was saved with shape [5, 5]" in L.lib.ddp_last_error_message()
    L.lib.ddp_module_free(m)
