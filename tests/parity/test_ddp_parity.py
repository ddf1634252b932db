"""libddp's reducer against PyTorch's DistributedDataParallel, same wheel,
same model, weights and data, 2 real processes, 50 SGD steps."""
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("model", ["mlp", "conv", "unused"])
def test_parameters_equal_pytorch_ddp_bitwise(model):
    world = 2
    torch_port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), TORCH_PORT=str(torch_port),
                   DDP_PORT=str(ddp_port), MODEL=model, OMP_NUM_THREADS="1", PYTHONPATH=HERE)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "ddp_parity_worker.py")], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outs = []
    try:
        for p in procs:
            outs.append(p.communicate(timeout=300)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    report = "\n".join(outs)
    assert all(p.returncode == 0 for p in procs), report
    assert report.count(" 0 mismatches") == world, report
