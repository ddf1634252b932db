"""The Python peers of bench_launch: torch.multiprocessing.spawn from a
Python program, and a worker for torchrun. Rank 0 reports when its first
gloo barrier completed, on CLOCK_MONOTONIC (as bench/mono_ns and
bench_launch read it)."""
import os
import sys
import time


def join_and_barrier(rank, world, queue=None):
    import torch.distributed as dist
    if queue is not None:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['BENCH_PORT']}",
                               rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo")  # env:// from torchrun
    dist.barrier()
    t = time.monotonic_ns()
    if rank == 0:
        if queue is not None:
            queue.put(t)
        else:
            print(f"barrier_ns={t}", flush=True)
    dist.destroy_process_group()


def mp_worker(rank, world, queue):
    join_and_barrier(rank, world, queue)


if __name__ == "__main__":
    if sys.argv[1] == "worker":
        join_and_barrier(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    else:
        import torch.multiprocessing as mp
        world = int(sys.argv[2])
        queue = mp.get_context("spawn").SimpleQueue()
        t0 = time.monotonic_ns()
        mp.spawn(mp_worker, args=(world, queue), nprocs=world, join=True)
        print(f"launch_to_barrier_ms={(queue.get() - t0) / 1e6:.1f}")
