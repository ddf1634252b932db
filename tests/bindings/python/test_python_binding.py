"""The SWIG Python binding (libddp): a 2-rank job through libddp.spawn
checked against torch, and the binding's own error and lifetime behaviour."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import libddp

HERE = os.path.dirname(os.path.abspath(__file__))


def test_two_ranks_match_torch():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(HERE, "swig_worker.py")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["all_ranks_ok"], report
    assert all(report["checks"].values()), report


def test_errors_raise_with_status_and_message():
    with pytest.raises(libddp.Error) as e:
        libddp.CommHook.powersgd(start_powersgd_iter=1)
    assert e.value.status == libddp.E_INVALID_ARGUMENT
    assert "start_powersgd_iter" in e.value.message
    with pytest.raises(TypeError):
        libddp.wrap(np.zeros(3, np.float32)[::2])  # not contiguous: refused before C


def test_one_rank_group_hooks_and_lifetimes():
    with libddp.Group(rank=0, world_size=1, master_addr="127.0.0.1", master_port=0) as g:
        assert (g.rank(), g.size(), g.backend()) == (0, 1, "shm")  # the CPU default
        x = np.arange(6, dtype=np.float64).reshape(2, 3)
        t = libddp.wrap(x)
        g.all_reduce(t, libddp.MAX)
        assert libddp.to_numpy(t) is x
        gathered = libddp.to_numpy(g.all_gather(t))
        assert gathered.shape == (1, 2, 3) and np.array_equal(gathered[0], x)
        with libddp.CommHook.powersgd(start_powersgd_iter=2) as h, libddp.CommHook.wrap_bf16(h) as w:
            grads = [np.random.RandomState(0).randn(16, 8).astype(np.float32), np.ones(8, np.float32)]
            r = libddp.reducer(g, grads)
            r.set_comm_hook(w)
            for _ in range(3):
                for i in (1, 0):
                    r.mark_ready(i)
                r.finish()
            before, after, iters = h.compression_stats()
            assert iters == 3 and before == 16 * 8 + 8 and after == (16 + 8) + 8
        avg = libddp.ModelAverager(g, period=2)
        avg.step([t])
        avg.close()
        avg.close()  # closing twice is harmless


def test_strategy_trains_like_torch(tmp_path):
    """Two ranks of DDPStrategy through the binding give rank 0 the losses
    and weights that torch computes for the same model, data order and
    optimizer on the averaged loss of both ranks' batches."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    torch.jit.script(model).save(str(tmp_path / "model.pt"))
    gen = np.random.RandomState(0)
    x = gen.randn(64, 8).astype(np.float32)
    y = gen.randint(0, 3, size=64).astype(np.int64)
    np.savez(tmp_path / "data.npz", x=x, y=y)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(HERE, "strategy_worker.py"), str(tmp_path / "model.pt"),
                        str(tmp_path / "data.npz"), str(tmp_path / "last.ckpt")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["all_ranks_ok"] and all(report["checks"].values()), report

    ref = torch.jit.load(str(tmp_path / "model.pt"))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for epoch in range(2):
        orders = []
        for r in range(2):
            sampler = torch.utils.data.DistributedSampler(range(64), num_replicas=2, rank=r, shuffle=True, seed=0)
            sampler.set_epoch(epoch)
            orders.append(list(sampler))
        for b in range(len(orders[0]) // 8):
            opt.zero_grad()
            per_rank = [torch.nn.functional.cross_entropy(ref(torch.from_numpy(x[o[b * 8:(b + 1) * 8]])),
                                                          torch.from_numpy(y[o[b * 8:(b + 1) * 8]])) for o in orders]
            ((per_rank[0] + per_rank[1]) / 2).backward()
            opt.step()
            losses.append(per_rank[0].item())
    assert np.allclose(report["losses"], losses, rtol=1e-5, atol=1e-6), (report["losses"], losses)
    with torch.no_grad():
        probe = ref(torch.from_numpy(x[:4])).numpy()
    assert np.allclose(report["probe"], probe, rtol=1e-5, atol=1e-6)
