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
