"""libddp's collectives against Lightning's own implementations, run from
the same torch wheel on the same inputs, on 2 and 4 real processes."""
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


@pytest.mark.parametrize("world", [2, 4])
def test_sync_ddp_and_gather_all_tensors_match_lightning(world):
    torch_port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), TORCH_PORT=str(torch_port),
                   DDP_PORT=str(ddp_port), OMP_NUM_THREADS="1", PYTHONPATH=HERE)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "lightning_parity_worker.py")],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=300)
            outputs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    report = "\n".join(outputs)
    assert all(p.returncode == 0 for p in procs), report
    assert "0 mismatches" in report
