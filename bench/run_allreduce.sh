#!/usr/bin/env bash
# All-reduce at 2 ranks, 4 B to 64 MiB, in one run: libddp's C API and raw
# c10d ProcessGroupGloo (same processes, alternating), then
# torch.distributed.all_reduce from Python. Prints the table of report.py.
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
MASTER_PORT=$(port) RAW_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
TORCH_PORT=$(port) run_ranks "$py" "$here/bench/bench_allreduce_torch.py"
echo "== all_reduce, $world ranks over loopback (gloo) =="
"$py" "$here/bench/report.py" "$out" "$world" c10d
# One rank: no network, so what is left is the C layer's own cost per call.
: >"$out"
world=1
echo
echo "== all_reduce, 1 rank (the C API's own overhead; no network) =="
WORLD_SIZE=1 BENCH_MAX_MB=1 MASTER_PORT=$(port) RAW_PORT=$(port) run_ranks "$build/bench/bench_allreduce"
"$py" "$here/bench/report.py" "$out" 1 c10d
rm -f "$out"
