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


def run_worker(script, timeout=120):
    """Runs one of this directory's spawn scripts (its own 2 ranks); returns its stdout once it exited 0."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.join(HERE, script)], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_two_ranks_match_torch():
    report = json.loads(run_worker("swig_worker.py", timeout=300).strip().splitlines()[-1])
    assert report["all_ranks_ok"], report
    assert all(report["checks"].values()), report


def test_errors_raise_with_status_and_message():
    with pytest.raises(libddp.Error) as e:
        libddp.CommHook.powersgd(start_powersgd_iter=1)
    assert e.value.status == libddp.E_INVALID_ARGUMENT
    assert "start_powersgd_iter" in e.value.message
    with pytest.raises(TypeError):
        libddp.wrap(np.zeros(3, np.float32)[::2])  # not contiguous: refused before C
    # Tensor.wrap's shape and dtype are checked by libddp, by name, before
    # the buffer's length is compared (an overflowing shape wrapped to a
    # small count where the binding multiplied it out).
    buf = np.ones(4, np.float32)
    for shape, dtype, said in (([2**62, 4], libddp.FLOAT32, "overflows int64"), ([-4], libddp.FLOAT32, "negative"),
                               ([4], 99, "unknown dtype 99"), ([5], libddp.FLOAT32, "the buffer's length")):
        with pytest.raises(libddp.Error) as e:
            libddp.Tensor.wrap(buf, dtype, shape)
        assert e.value.status == libddp.E_INVALID_ARGUMENT and said in e.value.message, (shape, e.value.message)
    assert [libddp.dtype_size(d) for d in (libddp.FLOAT32, libddp.FLOAT64, libddp.BFLOAT16, 99)] == [4, 8, 2, 0]


def test_methods_carry_the_interfaces_doc_comments():
    # SWIG's -doxygen turns the interface's /** */ comments into docstrings
    # (and Javadoc); without it a method has none.
    assert "caller's out" in (libddp.Group.all_gather_into_tensor.__doc__ or "")
    assert "zero tensor on the CPU" in (libddp.Tensor.zeros.__doc__ or "")


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


def test_dlpack_shares_memory_both_ways():
    import torch

    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    d = libddp.from_dlpack(t)
    assert d.data_address() == t.data_ptr() and (d.ndim(), d.dim_size(0), d.dim_size(1)) == (2, 2, 3)
    d.copy_from(np.full(6, 7, np.float32))  # written through libddp, seen by torch
    assert torch.equal(t, torch.full((2, 3), 7.0))
    back = torch.from_dlpack(d)
    assert back.data_ptr() == t.data_ptr()
    del d, t  # the exported view keeps the memory alive
    assert torch.equal(back, torch.full((2, 3), 7.0))
    for dtype in (torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32, torch.int64,
                  torch.bool):
        x = torch.zeros(3, dtype=dtype)
        assert torch.from_dlpack(libddp.from_dlpack(x)).dtype == dtype
    assert libddp.from_dlpack(np.arange(4, dtype=np.int32)).dtype() == libddp.INT32  # NumPy's __dlpack__ too
    with pytest.raises(TypeError):
        libddp.from_dlpack(object())
    capsule = torch.zeros(2).__dlpack__()
    libddp.from_dlpack(capsule)
    with pytest.raises(TypeError):  # a capsule is taken once
        libddp.from_dlpack(capsule)
    with pytest.raises(libddp.Error) as e:  # complex numbers: refused with a message, nothing leaked
        libddp.from_dlpack(torch.zeros(2, dtype=torch.complex64))
    assert e.value.status == libddp.E_UNSUPPORTED and "ComplexFloat" in e.value.message


def test_options_objects_hold_the_c_defaults_and_refuse_unknown_names():
    o = libddp.StrategyOptions()
    assert (o.kind, o.devices, o.bucket_cap_mb, o.first_bucket_mb, o.broadcast_buffers) == (libddp.STRATEGY_DDP, 0,
                                                                                              25.0, 1.0, 1)
    assert (o.backend, o.precision, o.gradient_clip_algorithm, o.divide_by_initial_world_size) == (None, None,
                                                                                                   libddp.CLIP_NORM, 1)
    o.precision = "bf16-mixed"
    o.precision = "16-mixed"  # the previous copy is freed, this one kept
    assert o.precision == "16-mixed"
    r = libddp.ReducerOptions()
    assert (r.bucket_cap_mb, r.broadcast_parameters, r.join_enabled) == (25.0, 0, 0)  # over gradients: none
    assert (libddp.AdamOptions().weight_decay, libddp.AdamOptions.adamw().weight_decay) == (0.0, 0.01)
    assert libddp.LrSchedulerOptions(libddp.LR_LINEAR).total_iters == 5
    with pytest.raises(TypeError) as e:
        libddp.strategy(device=2)
    assert "device" in str(e.value)
    with pytest.raises(libddp.Error) as e:
        libddp.strategy(precision="fp12")
    assert "fp12" in e.value.message
    assert libddp.sampler_order(10, 2, 1, 0, shuffle=False) == [1, 3, 5, 7, 9]
    assert libddp.sampler_order(10, 2, 1, 0, shuffle=False, start=4) == [5, 7, 9]
    assert libddp.sampler_num_samples(11, 2) == 6


def test_module_of_torch_tensors_by_name(tmp_path):
    import torch

    weight, bias, mean = torch.randn(3, 4), torch.randn(3), torch.zeros(3)
    tensors = [libddp.from_dlpack(x) for x in (weight, bias, mean)]
    m = libddp.Module.from_tensors(["net.weight", "net.bias", "bn.running_mean"], tensors, 1)
    assert m.state_count() == 3 and m.num_parameters() == 2
    assert [m.state_name(i) for i in range(3)] == ["net.weight", "net.bias", "bn.running_mean"]
    assert [m.state_is_parameter(i) for i in range(3)] == [True, True, False]
    assert m.get("net.bias").data_address() == bias.data_ptr()
    m.set("net.bias", libddp.from_dlpack(torch.ones(3)))
    assert torch.equal(bias, torch.ones(3))  # written into the caller's tensor
    m.save_state_dict(str(tmp_path / "sd.pt"))
    assert torch.equal(torch.load(tmp_path / "sd.pt")["net.weight"], weight)
    with pytest.raises(libddp.Error):
        libddp.Module.from_tensors(["only.one"], tensors, 0)  # names and tensors differ in number


def test_reducer_with_options_over_torch_gradients():
    import torch

    with libddp.Group(rank=0, world_size=1, master_addr="127.0.0.1", master_port=0) as g:
        grads = [torch.ones(5), torch.full((2, 2), 3.0)]
        r = libddp.reducer_with(g, [libddp.from_dlpack(x) for x in grads], bucket_cap_mb=1, find_unused_parameters=1)
        r.mark_ready(1)  # the other counts as unused
        r.finish()
        assert torch.equal(grads[1], torch.full((2, 2), 3.0)) and torch.equal(grads[0], torch.zeros(5))
        r.close()


def test_a_failing_python_comm_hook_stops_every_rank():
    lines = [json.loads(line) for line in run_worker("hook_failure_worker.py").splitlines() if line.startswith("{")]
    got = {k: v for line in lines for k, v in line.items()}
    assert got["rank1"][0] == libddp.E_INVALID_ARGUMENT and "refuses bucket 0" in got["rank1"][1], got
    assert got["rank0"] is not None and "rank 1" in got["rank0"][1], got


def test_async_collectives_env_and_wait_timeout():
    checks = json.loads(run_worker("async_env_worker.py").strip().splitlines()[-1])
    assert checks == {"env": True, "async": True, "into": True, "timeout": True}, checks
