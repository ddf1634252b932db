"""SLURM's auto-requeue through the strategy (Lightning's SignalConnector):
2 ranks started with SLURM's environment (as srun starts them) and a fake
`scontrol` on PATH that records its arguments. Only rank 1 gets SIGUSR1
after step 3; both ranks stop at the same step, the checkpoint is written,
and rank 0 alone runs `scontrol requeue <job id>` (the array task's id for
an array job). A failing scontrol is DDP_E_IO naming its exit status on
both ranks; outside SLURM the signal is not taken over."""
import os
import socket
import stat
import subprocess
import sys

import pytest

BUILD = os.environ.get("DDP_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
JOB = os.path.join(BUILD, "tests", "requeue_job")
SURFACE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "surface")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def workdir(tmp_path):
    subprocess.run([sys.executable, os.path.join(SURFACE, "export_surface.py"), str(tmp_path)], check=True)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "scontrol"
    fake.write_text('#!/bin/sh\necho "$@" >> "$SCONTROL_LOG"\nexit "${SCONTROL_EXIT:-0}"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def run_ranks(workdir, world=2, extra=None, slurm=True):
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   PATH=f"{workdir / 'bin'}:{os.environ['PATH']}", SCONTROL_LOG=str(workdir / "scontrol.log"),
                   **(extra or {}))
        if slurm:
            env.update(SLURM_NTASKS=str(world), SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank), SLURM_NODEID="0",
                       SLURM_NNODES="1", SLURM_NTASKS_PER_NODE=str(world), SLURM_JOB_ID="4242",
                       SLURM_NODELIST="127.0.0.1", SLURM_JOB_NAME="train")
        else:
            env.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                       GROUP_RANK="0", TORCHELASTIC_RUN_ID="test")
        procs.append(subprocess.Popen([JOB, str(workdir)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = [p.communicate(timeout=120) for p in procs]
    return [p.returncode for p in procs], [o for o, _ in outs], [e for _, e in outs]


def test_one_ranks_signal_stops_every_rank_at_the_same_step_and_rank_zero_requeues(workdir):
    codes, outs, errs = run_ranks(workdir)
    assert codes == [0, 0], errs
    for rank, out in enumerate(outs):
        assert f"rank {rank} requeue at step 3" in out, out
        assert f"rank {rank} requeue status 0" in out, out
    assert (workdir / "scontrol.log").read_text() == "requeue 4242\n"  # once, by rank 0
    assert (workdir / "hpc.ckpt").exists()


def test_an_array_task_is_requeued_by_its_array_id(workdir):
    codes, outs, errs = run_ranks(workdir, extra={"SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "5"})
    assert codes == [0, 0], errs
    assert (workdir / "scontrol.log").read_text() == "requeue 77_5\n"


def test_a_failing_scontrol_is_an_io_status_on_every_rank(workdir):
    codes, outs, errs = run_ranks(workdir, extra={"SCONTROL_EXIT": "3"})
    assert codes == [0, 0], errs
    for rank, out in enumerate(outs):
        assert f"rank {rank} requeue status -8" in out and "scontrol requeue 4242: exit status 3" in out, out


def test_outside_slurm_the_signal_is_left_alone(workdir):
    # Under torchrun's environment SIGUSR1 keeps its default action: rank 1
    # dies of it, and rank 0 stops with a status (not a hang), no requeue.
    codes, outs, errs = run_ranks(workdir, slurm=False)
    assert codes[1] == -10, errs
    assert codes[0] == 2 and "requeue_job:" in errs[0], errs[0]
    assert all("requeue at" not in out for out in outs)
    assert not (workdir / "scontrol.log").exists()
