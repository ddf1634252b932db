"""Runs a parity worker script on N real processes (one per rank), each with
a torch.distributed port and a libddp port, and returns their outputs."""
import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script, world, extra_env=None, timeout=300):
    """Returns (return codes, combined output). No process outlives the call.
    A run that passes `timeout` is stopped with SIGABRT, which makes each
    rank still running print every Python thread's stack (PYTHONFAULTHANDLER),
    so that the report says where it hung; then it is killed."""
    torch_port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), TORCH_PORT=str(torch_port),
                   DDP_PORT=str(ddp_port), OMP_NUM_THREADS="1", PYTHONPATH=HERE, PYTHONFAULTHANDLER="1",
                   **(extra_env or {}))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, script)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = [""] * world
    deadline = time.monotonic() + timeout
    try:
        for rank, p in enumerate(procs):
            try:
                outputs[rank] = p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0]
            except subprocess.TimeoutExpired:
                break
        hung = [rank for rank, p in enumerate(procs) if p.poll() is None]
        for rank in hung:
            procs[rank].send_signal(signal.SIGABRT)
        for rank in hung:
            try:
                outputs[rank] = f"[rank {rank} still running after {timeout} s; its stacks:]\n" + \
                    procs[rank].communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                outputs[rank] = f"[rank {rank} still running after {timeout} s; no stacks]"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return [p.returncode for p in procs], "\n".join(outputs)
