#!/usr/bin/env bash
# The shared-memory backend against Gloo (issue 14), both through libddp's C
# API in processes of their own with one process group each, alternating
# for BENCH_REPEATS (3) rounds, at 2 and 4 ranks (WORLDS), 4 KiB to
# BENCH_MAX_MB (256) MiB; and one process's memcpy of the same sizes, in the
# same run, as the bandwidth to compare with. Prints report_shm.py's table.
source "$(dirname "$0")/common.sh"
out=$(mktemp)
run_ranks() {  # run_ranks <world> <cmd...>: one process per rank, rank 0's stdout kept
  local world=$1 pids=()
  shift
  for ((r = 0; r < world; r++)); do
    if [ $r -eq 0 ]; then WORLD_SIZE=$world RANK=$r "$@" >>"$out" & else WORLD_SIZE=$world RANK=$r "$@" >/dev/null & fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
}
export MASTER_ADDR=127.0.0.1 BENCH_ROUNDS=1 BENCH_MIN_BYTES=${BENCH_MIN_BYTES:-4096} BENCH_MAX_MB=${BENCH_MAX_MB:-256}
for world in ${WORLDS:-2 4}; do
  : >"$out"
  for ((rep = 0; rep < ${BENCH_REPEATS:-3}; rep++)); do
    BENCH_IMPL=capi BENCH_BACKEND=shm MASTER_PORT=$(port) run_ranks "$world" "$build/bench/bench_allreduce"
    BENCH_IMPL=capi BENCH_BACKEND=gloo MASTER_PORT=$(port) run_ranks "$world" "$build/bench/bench_allreduce"
    BENCH_IMPL=memcpy run_ranks 1 "$build/bench/bench_allreduce"
  done
  echo "== all_reduce float32, $world ranks on one host: shm vs gloo, and memcpy in the same run =="
  "$py" "$here/bench/report_shm.py" "$out" "$world"
  echo
done
rm -f "$out"
