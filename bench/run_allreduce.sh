#!/usr/bin/env bash
# All-reduce at 2 ranks, 4 B to BENCH_MAX_MB MiB (64), in one run: libddp's C
# API, raw c10d ProcessGroupGloo and torch.distributed.all_reduce from
# Python, each in processes of its own holding one process group, measured
# the same way; the contenders alternate for BENCH_REPEATS (3) rounds and
# report.py gives the median over rounds. Prints the table of report.py.
source "$(dirname "$0")/common.sh"
world=${WORLD:-2}
out=$(mktemp)
run_ranks() {  # run_ranks <cmd...>: one process per rank, rank 0's stdout kept
  local pids=()
  for ((r = 0; r < world; r++)); do
    if [ $r -eq 0 ]; then RANK=$r "$@" >>"$out" & else RANK=$r "$@" >/dev/null & fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
export WORLD_SIZE=$world MASTER_ADDR=127.0.0.1
export BENCH_ROUNDS=1
for ((rep = 0; rep < ${BENCH_REPEATS:-3}; rep++)); do
  BENCH_IMPL=capi BENCH_BACKEND=gloo MASTER_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
  BENCH_IMPL=capi BENCH_BACKEND=shm MASTER_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
  BENCH_IMPL=c10d MASTER_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
  TORCH_PORT=$(port) run_ranks "$py" "$here/bench/bench_allreduce_torch.py"
done
echo "== all_reduce, $world ranks over loopback (gloo), each contender with one process group =="
"$py" "$here/bench/report.py" "$out" "$world" torch.distributed
# One rank: no network, so what is left is the C layer's own cost per call.
: >"$out"
world=1
echo
echo "== all_reduce, 1 rank (the C API's own overhead; no network) =="
WORLD_SIZE=1 BENCH_MAX_MB=1 BENCH_IMPL=capi BENCH_BACKEND=gloo MASTER_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
WORLD_SIZE=1 BENCH_MAX_MB=1 BENCH_IMPL=c10d MASTER_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
"$py" "$here/bench/report.py" "$out" 1 c10d
rm -f "$out"
