"""torchrun compatibility both ways: torch.distributed workers, started by
ddprun as torchrun would start them (TORCHELASTIC_USE_AGENT_STORE), meet in
the store the LibTorch-free agent hosts, through c10d's own client; and
libddp's ranks, started by torchrun itself, meet in torchrun's store (c10d's
server, hosted by the Python agent) through libddp's own client."""
import os
import subprocess
import sys

BUILD = os.environ["DDP_BUILD"]

WORKER = r"""
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
objs = [None]
if dist.get_rank() == 0:
    objs = [{"from": 0}]
dist.broadcast_object_list(objs, src=0)
dist.barrier()
print("sum=%g agent_store=%s obj=%s" % (t.item(), os.environ.get("TORCHELASTIC_USE_AGENT_STORE"), objs[0]))
dist.destroy_process_group()
"""


def run(nproc, tmp_path):
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([os.path.join(BUILD, "tools", "ddprun"), "--standalone", "--nproc-per-node", str(nproc),
                           sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)


def test_torch_distributed_workers_rendezvous_in_ddpruns_store(tmp_path):
    r = run(3, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [l for l in r.stdout.splitlines() if "sum=" in l]
    assert len(lines) == 3, r.stdout + r.stderr
    for l in lines:
        assert "sum=6 agent_store=True obj={'from': 0}" in l, l


def test_libddp_ranks_rendezvous_in_torchruns_own_store():
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--no-python", "--standalone",
                        "--nproc-per-node", "2", os.path.join(BUILD, "examples", "allreduce_demo")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(l for l in r.stdout.splitlines() if l.startswith("[rank "))
    assert len(lines) == 2, r.stdout + r.stderr
    for rank, l in enumerate(lines):
        assert l.startswith("[rank %d/2] sum=[1 3 5] mean=[0.5 1.5 2.5] all_gather=[0 1]" % rank), l
