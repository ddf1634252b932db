"""The training surface through the SWIG Python binding, against torch from
the same wheel: tensor arithmetic and its gradients, every loss, the grad
mode and seeding, module methods with several and keyword inputs, parameter
groups, SequentialLR, the logged metric, and the strategy's two-rank calls
(surface_worker.py)."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import libddp

HERE = os.path.dirname(os.path.abspath(__file__))


def leaf(values):
    """A float32 libddp leaf that requires grad, and the torch twin of the same values."""
    mine = libddp.from_dlpack(torch.tensor(values, dtype=torch.float32))
    mine.set_requires_grad(True)
    theirs = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    return mine, theirs


def params(*tensors):
    """libddp leaves that require grad over torch tensors' memory (shared)."""
    out = [libddp.from_dlpack(t.detach()) for t in tensors]
    for t in out:
        t.set_requires_grad(True)
    return out


def as_torch(t):
    return torch.from_dlpack(t.clone())


def test_arithmetic_and_gradients_equal_torch():
    values = [[0.5, 1.5, 2.0], [3.0, 0.25, 1.0]]
    a, ta = leaf(values)
    b, tb = leaf([2.0, 0.5, 3.0])
    mine = ((a * b + a / b - b) ** 2).sum() + (-a).exp().mean([1]).sum() + a.softmax(-1, log=True).sum()
    theirs = ((ta * tb + ta / tb - tb) ** 2).sum() + (-ta).exp().mean(1).sum() + ta.log_softmax(-1).sum()
    assert math.isclose(mine.item(), theirs.item(), rel_tol=1e-6)
    mine.backward()
    theirs.backward()
    assert torch.allclose(as_torch(a.grad()), ta.grad) and torch.allclose(as_torch(b.grad()), tb.grad)
    for name in ("exp", "log", "sqrt", "abs", "relu", "sigmoid", "tanh"):
        assert torch.allclose(as_torch(getattr(a, name)()), getattr(torch, name)(ta.detach())), name
    assert torch.equal(as_torch(a.binary_scalar(libddp.OP_MAXIMUM, 1.0)), ta.detach().clamp(min=1.0))
    assert a.sum([0], keepdim=True).dim_size(0) == 1 and a.sum().ndim() == 0
    with pytest.raises(libddp.Error) as e:
        a.binary(libddp.OP_ADD, libddp.from_dlpack(torch.zeros(4)))
    assert e.value.status == libddp.E_INVALID_ARGUMENT and "[2, 3]" in e.value.message


def test_grad_mode_seed_and_determinism():
    a, _ = leaf([1.0, 2.0])
    assert libddp.is_grad_enabled()
    assert libddp.set_grad_enabled(False) is True  # the previous mode
    try:
        assert not (a * 2).requires_grad()
    finally:
        libddp.set_grad_enabled(True)
    assert (a * 2).requires_grad()
    # libddp seeds the LibTorch this process shares with torch.
    assert libddp.seed_everything(1234) == 1234
    drawn = torch.rand(5)
    torch.manual_seed(1234)
    assert torch.equal(drawn, torch.rand(5))
    assert libddp.reset_seed() is True  # PL_GLOBAL_SEED is set now
    libddp.set_deterministic(True, warn_only=True)
    try:
        assert libddp.is_deterministic() and torch.are_deterministic_algorithms_enabled()
    finally:
        libddp.set_deterministic(False)
    assert libddp.dtype_name(libddp.BFLOAT16) == "bfloat16"
    assert libddp.version_number() > 0


@pytest.mark.parametrize("kind,fn,target,options,theirs", [
    (libddp.LOSS_MSE, torch.nn.functional.mse_loss, "float", {}, {}),
    (libddp.LOSS_CROSS_ENTROPY, torch.nn.functional.cross_entropy, "class",
     {"label_smoothing": 0.1, "reduction": libddp.REDUCTION_SUM}, {"label_smoothing": 0.1, "reduction": "sum"}),
    (libddp.LOSS_BCE_WITH_LOGITS, torch.nn.functional.binary_cross_entropy_with_logits, "unit", {}, {}),
    (libddp.LOSS_L1, torch.nn.functional.l1_loss, "float", {}, {}),
    (libddp.LOSS_SMOOTH_L1, torch.nn.functional.smooth_l1_loss, "float", {"beta": 0.5}, {"beta": 0.5}),
    (libddp.LOSS_HUBER, torch.nn.functional.huber_loss, "float", {"delta": 0.3}, {"delta": 0.3}),
    (libddp.LOSS_NLL, torch.nn.functional.nll_loss, "class", {"ignore_index": 2}, {"ignore_index": 2}),
    (libddp.LOSS_KL_DIV, torch.nn.functional.kl_div, "unit", {"reduction": libddp.REDUCTION_BATCHMEAN},
     {"reduction": "batchmean"}),
])
def test_every_loss_equals_torch(kind, fn, target, options, theirs):
    gen = torch.Generator().manual_seed(kind)
    x = torch.randn(4, 3, generator=gen)
    y = {"float": torch.randn(4, 3, generator=gen), "unit": torch.rand(4, 3, generator=gen),
         "class": torch.tensor([0, 2, 1, 2])}[target]
    a, ta = leaf(x.tolist())
    mine = libddp.loss(kind, a, libddp.from_dlpack(y), **options)
    expected = fn(ta, y, **theirs)
    assert math.isclose(mine.item(), expected.item(), rel_tol=1e-5, abs_tol=1e-7)
    mine.backward()
    expected.backward()
    assert torch.allclose(as_torch(a.grad()), ta.grad, atol=1e-6)


class _Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Linear(3, 2)

    def forward(self, x, scale: float = 1.0, shift: torch.Tensor = torch.zeros(1)):
        h = self.body(x) * scale + shift
        return {"logits": h, "probs": h.softmax(-1)}

    @torch.jit.export
    def pair(self, x, y):
        return x + y, x * y


def test_module_methods_with_several_and_keyword_inputs(tmp_path):
    torch.manual_seed(0)
    net = _Heads()
    torch.jit.script(net).save(str(tmp_path / "heads.pt"))
    m = libddp.Module.load(str(tmp_path / "heads.pt"))
    x, shift = torch.randn(4, 3), torch.full((2,), 0.5)
    out = m(libddp.from_dlpack(x), shift=libddp.from_dlpack(shift))
    assert list(out) == ["logits", "probs"]
    with torch.no_grad():
        expected = net(x, shift=shift)
    assert torch.allclose(as_torch(out["logits"]), expected["logits"])
    assert torch.allclose(as_torch(out["probs"]), expected["probs"])
    s, p = m(libddp.from_dlpack(x), libddp.from_dlpack(x), method="pair")
    assert torch.allclose(as_torch(s), 2 * x) and torch.allclose(as_torch(p), x * x)
    with pytest.raises(libddp.Error) as e:
        m(libddp.from_dlpack(x), method="nope")
    assert "nope" in e.value.message
    with pytest.raises(libddp.Error) as e:
        m(libddp.from_dlpack(x), bogus=libddp.from_dlpack(shift))
    assert "bogus" in e.value.message


def test_parameter_groups_step_as_torch():
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 3)
    twin = torch.nn.Linear(4, 3)
    twin.load_state_dict(net.state_dict())
    names = ["weight", "bias"]
    weight, bias = params(*net.parameters())
    m = libddp.Module.from_tensors(names, [weight, bias], 0)
    sgd = libddp.SgdOptions()
    sgd.lr, sgd.weight_decay, sgd.momentum = 0.1, 0.01, 0.9
    opt = libddp.Optimizer.sgd_groups(m, sgd, libddp.param_groups({"params": ["bias"], "weight_decay": 0.0,
                                                                   "lr": 0.5}, {"params": []}))
    assert opt.num_groups() == 2 and opt.group_lr(0) == 0.5 and opt.group_lr(1) == 0.1
    theirs = torch.optim.SGD([{"params": [twin.bias], "weight_decay": 0.0, "lr": 0.5},
                              {"params": [twin.weight]}], lr=0.1, weight_decay=0.01, momentum=0.9)
    x = torch.randn(5, 4)
    stepper = libddp.Strategy(devices=1)  # the C API steps an optimizer through a strategy
    stepper.setup_environment()
    stepper.setup_module(m)
    for _ in range(2):
        opt.zero_grad()
        theirs.zero_grad()
        # The caller's own forward of the module's tensors: x W^T + b by broadcasting.
        stepper.forward_begin(m)
        out = (libddp.from_dlpack(x[:, None, :].contiguous()) * weight).sum([2]) + bias
        stepper.forward_end()
        stepper.backward(libddp.loss(libddp.LOSS_MSE, out, libddp.from_dlpack(torch.zeros(5, 3))))
        torch.nn.functional.mse_loss(twin(x), torch.zeros(5, 3)).backward()
        assert stepper.optimizer_step(opt)
        theirs.step()
    stepper.teardown()
    assert torch.allclose(net.weight, twin.weight, atol=1e-6) and torch.allclose(net.bias, twin.bias, atol=1e-6)
    opt.set_group_lr(1, 0.05)
    assert opt.group_lr(1) == 0.05
    with pytest.raises(libddp.Error) as e:
        libddp.Optimizer.sgd_groups(m, sgd, libddp.param_groups({"params": ["nothing.*"]}, {"params": []}))
    assert "nothing.*" in e.value.message


def test_sequential_lr_follows_torch():
    m = libddp.Module.from_tensors(["w"], [libddp.from_dlpack(torch.zeros(2))], 0)
    opt = libddp.Optimizer.sgd(m, lr=1.0)
    warm = libddp.lr_scheduler(opt, libddp.LR_LINEAR, start_factor=0.1, total_iters=3)
    cos = libddp.lr_scheduler(opt, libddp.LR_COSINE_ANNEALING, t_max=5)
    seq = libddp.LrScheduler.sequential(opt, [warm, cos], [3])
    w = torch.zeros(2, requires_grad=True)
    topt = torch.optim.SGD([w], lr=1.0)
    tseq = torch.optim.lr_scheduler.SequentialLR(topt, [
        torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.1, total_iters=3),
        torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=5)], milestones=[3])
    for _ in range(7):
        seq.step()
        tseq.step()
        assert math.isclose(seq.last_lr(), tseq.get_last_lr()[0], rel_tol=1e-9)
    with pytest.raises(libddp.Error):
        libddp.LrScheduler.sequential(opt, [warm, cos], [3, 4])  # one milestone fewer than schedulers


def test_metric_env_and_optimizer_step_fn(tmp_path):
    metric = libddp.Metric()
    metric.update(1.0, 2)
    metric.update(4.0, 1)
    assert math.isclose(metric.compute(), 2.0)  # batch-size weighted
    metric.reset()
    metric.update(3.0)
    assert metric.compute() == 3.0
    top = libddp.Metric(libddp.METRIC_MAX)
    for v in (1.0, 5.0, 2.0):
        top.update(v)
    assert top.compute() == 5.0
    env = libddp.Env.from_vars(["RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2", "GROUP_RANK=1",
                                "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"], "torchelastic")
    assert (env.rank(), env.world_size(), env.local_rank(), env.node_rank()) == (3, 4, 1, 1)
    # The caller's own optimizer step inside the precision's step; its exception comes back as it is.
    with libddp.Strategy(devices=1) as s:
        s.setup_environment()
        s.setup_module(libddp.Module.from_tensors(["w"], params(torch.zeros(2)), 0))
        calls = []
        assert s.optimizer_step_fn(lambda: calls.append(1)) is True and calls == [1]
        with pytest.raises(ZeroDivisionError):
            s.optimizer_step_fn(lambda: 1 / 0)
        with pytest.raises(libddp.Error) as e:
            s.optimizer_step_fn(lambda: 7)  # a C-style status other than 0
        assert "7" in e.value.message
        s.teardown()


def test_two_ranks_strategy_surface(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(HERE, "surface_worker.py"), str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    failed = {k: v for k, v in report["checks"].items() if v is not True}
    assert not failed and report["all_ranks_ok"], report


def test_reducer_gradient_and_bucket_indices():
    with libddp.Group(rank=0, world_size=1, master_addr="127.0.0.1", master_port=0) as g:
        grads = [np.ones(10, np.float32), np.ones(10, np.float32), np.ones(300_000, np.float32)]
        r = libddp.reducer_with(g, [libddp.wrap(x) for x in grads], bucket_cap_mb=1, first_bucket_mb=1)
        buckets = [libddp.to_numpy(r.bucket_indices(b)).tolist() for b in range(r.bucket_count())]
        # DDP fills buckets in reverse parameter order: the 1.2 MB one fills the first, the small ones share one.
        assert buckets == [[2], [1, 0]], buckets
        assert r.gradient(1).data_address() == grads[1].ctypes.data  # the caller's own buffer
        with pytest.raises(libddp.Error):
            r.bucket_indices(5)


class _MemoryIO:
    """Lightning's CheckpointIO in a dict."""

    def __init__(self):
        self.files, self.calls = {}, []

    def save(self, path, data):
        self.calls.append(("save", path))
        self.files[path] = bytes(data)

    def load(self, path):
        self.calls.append(("load", path))
        return self.files[path]

    def remove(self, path):
        self.calls.append(("remove", path))
        del self.files[path]


class _OneProcess:
    """Lightning's ClusterEnvironment for a job of one process on a free port."""

    def __init__(self, port):
        self.main_address, self.main_port = "127.0.0.1", port

    def world_size(self):
        return 1

    def global_rank(self):
        return 0

    def local_rank(self):
        return 0

    def local_world_size(self):
        return 1

    def node_rank(self):
        return 0


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_checkpoint_io_and_cluster_environment_written_in_python():
    import io as _io
    store = _MemoryIO()
    weights = torch.arange(3, dtype=torch.float32)
    with libddp.strategy(devices=1, checkpoint_io=store, cluster_environment=_OneProcess(_free_port())) as s:
        s.setup_environment()
        m = libddp.Module.from_tensors(["w"], params(weights), 0)
        s.setup_module(m)
        s.save_checkpoint("mem://last.ckpt", m, None, 5, 1)
        assert store.calls == [("save", "mem://last.ckpt")]
        assert torch.equal(torch.load(_io.BytesIO(store.files["mem://last.ckpt"]), weights_only=False)
                           ["state_dict"]["w"], weights)
        fresh = torch.zeros(3)
        step, epoch = s.load_checkpoint("mem://last.ckpt", libddp.Module.from_tensors(["w"], params(fresh), 0), None)
        assert (step, epoch) == (5, 1) and torch.equal(fresh, weights)
        s.remove_checkpoint("mem://last.ckpt")
        assert store.files == {} and store.calls[-1] == ("remove", "mem://last.ckpt")
        with pytest.raises(libddp.Error) as e:
            s.load_checkpoint("mem://gone.ckpt", m, None)  # load raises KeyError: DDP_E_IO naming the path
        assert e.value.status == libddp.E_IO and "mem://gone.ckpt" in e.value.message
        s.teardown()

    class Broken(_OneProcess):
        def global_rank(self):
            raise RuntimeError("no rank here")

    with libddp.strategy(devices=1, cluster_environment=Broken(_free_port())) as s:
        with pytest.raises(libddp.Error) as e:
            s.setup_environment()
        assert e.value.status == libddp.E_INVALID_ARGUMENT and "global_rank" in e.value.message


def test_bad_input_is_refused_with_its_own_message():
    a = libddp.from_dlpack(torch.ones(3))
    cases = [
        (lambda: a.binary(libddp.OP_ADD, None), "b is NULL"),
        (lambda: a.unary(99), "operator 99"),
        (lambda: a.item(), "3 elements"),
        (lambda: libddp.Metric(17), "reduction 17"),
        # A refusal the binding makes itself carries its own message, not the previous call's.
        (lambda: libddp.Strategy(devices=1).group(), "Strategy.group: before setup_environment"),
        (lambda: libddp.Optimizer.sgd_groups(libddp.Module.from_tensors(["w"], params(torch.ones(2)), 0),
                                             libddp.SgdOptions(), None), "no param groups"),
        (lambda: libddp.LrScheduler.sequential(None, [], []), "one milestone fewer"),
    ]
    for call, expected in cases:
        with pytest.raises(libddp.Error) as e:
            call()
        assert expected in e.value.message, (expected, e.value.message)
    closed = libddp.Metric()
    closed.close()
    with pytest.raises(libddp.Error) as e:
        closed.update(1.0)  # a freed handle is refused, never used
    assert "not a live ddp_metric" in e.value.message
