"""Python's all-reduce at every size, one contender per run (one process
group per process, the same program under ddprun): `libddp` reduces a
torch tensor in place through DLPack (no copy: the data pointer is checked
to be torch's own) on libddp's default CPU backend; `torch` calls
torch.distributed.all_reduce on the same tensor over gloo. Rank 0 prints
one JSON line per size: median microseconds per call over 5 blocks.
    ddprun --standalone --nproc-per-node 2 python bench_python_allreduce.py libddp|torch"""
import json
import statistics
import sys
import time

import torch

SIZES = [4, 64, 1024, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]  # bytes


def calls_for(nbytes):
    return max(10, min(2000, (64 << 20) // max(nbytes, 1) // 8))


def main(impl):
    if impl == "libddp":
        import libddp
        group = libddp.Group()
        rank = group.rank()

        def prepare(t):
            view = libddp.from_dlpack(t)
            assert view.data_address() == t.data_ptr(), "DLPack copied"
            return lambda: group.all_reduce(view, libddp.SUM)
        barrier = group.barrier
    else:
        import torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()

        def prepare(t):
            return lambda: dist.all_reduce(t)
        barrier = dist.barrier
    for nbytes in SIZES:
        t = torch.ones(nbytes // 4)
        call = prepare(t)
        calls = calls_for(nbytes)
        for _ in range(max(3, calls // 10)):
            call()
        per = []
        for _ in range(5):
            barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                call()
            per.append((time.perf_counter() - t0) / calls * 1e6)
        if rank == 0:
            print(json.dumps({"impl": impl, "bytes": nbytes, "us": round(statistics.median(per), 3)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
