"""Runs a parity worker script on N real processes (one per rank), each with
a torch.distributed port and a libddp port, and returns their outputs."""
import os
import socket
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script, world, extra_env=None, timeout=300):
    """Returns (return codes, combined output). No process outlives the call."""
    torch_port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), TORCH_PORT=str(torch_port),
                   DDP_PORT=str(ddp_port), OMP_NUM_THREADS="1", PYTHONPATH=HERE, **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, script)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs], "\n".join(outputs)
