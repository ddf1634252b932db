#!/usr/bin/env bash
# What a view of caller memory costs a collective (bench_caller_memory.c):
# 2 ranks under ddprun, all-reduce of 4 KiB to 16 MiB, blocking and async,
# on ddp_tensor_from_blob memory against a ddp_tensor_new tensor of the same
# size, alternating; over Gloo (libddp works on a copy), over shm, and over
# shm with its worker thread taking the calls above 4 MiB (DDP_SHM_INLINE=0:
# what a host with cores to spare does). Prints rank 0's lines.
source "$(dirname "$0")/common.sh"
run() {  # <backend> [label]
  "$build/tools/ddprun" --standalone --nproc-per-node 2 --no-python "$build/bench/bench_caller_memory" "$@" 2>&1 |
    sed 's/^\[rank0\]: //'
}
run gloo
run shm
DDP_SHM_INLINE=0 run shm shm-worker
