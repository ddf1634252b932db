#!/usr/bin/env bash
# Issue 27: what the flight recorder costs while nothing fails.
#  1. The recorder's own work per collective (record + waiting + finish),
#     timed over millions of iterations in one process (best of 5).
#  2. A 4-byte all-reduce through the C API on 2 ranks (shm, the default,
#     and gloo), with the recorder on (the default, 2048 entries) and off
#     (DDP_FLIGHT_RECORDER_ENTRIES=0), alternating for BENCH_REPEATS (5)
#     rounds in processes of their own; medians of the rounds' p50.
# The cost is 1. as a share of 2.'s p50 with the recorder off: the A/B
# difference itself is below this machine's noise.
source "$(dirname "$0")/common.sh"
cycle_ns=$("$build/bench/bench_flight_cycle")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run_pair() {  # run_pair <label> <env...>: rank 0's 4-byte line, labelled
  local label=$1 p
  shift
  p=$(port)
  env "$@" MASTER_ADDR=127.0.0.1 MASTER_PORT=$p WORLD_SIZE=2 RANK=1 "$build/bench/bench_allreduce" >/dev/null &
  env "$@" MASTER_ADDR=127.0.0.1 MASTER_PORT=$p WORLD_SIZE=2 RANK=0 "$build/bench/bench_allreduce" |
    grep '"bytes": 4,' | sed "s/^/$label /" >>"$out"
  wait
}
export BENCH_IMPL=capi BENCH_MIN_BYTES=4 BENCH_MAX_BYTES=4 BENCH_ROUNDS=5
for backend in shm gloo; do
  for ((rep = 0; rep < ${BENCH_REPEATS:-5}; rep++)); do
    run_pair "$backend-on" BENCH_BACKEND=$backend
    run_pair "$backend-off" BENCH_BACKEND=$backend DDP_FLIGHT_RECORDER_ENTRIES=0
  done
done
"$py" - "$out" "$cycle_ns" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, js = line.split(" ", 1)
    rows.setdefault(label, []).append(json.loads(js)["p50_us"])
cycle = float(sys.argv[2])
print(f"flight recorder, per collective (record + waiting + finish): {cycle:.1f} ns")
print("4-byte all_reduce, 2 ranks, C API, median of the rounds' p50:")
for b in ("shm", "gloo"):
    on, off = statistics.median(rows[f"{b}-on"]), statistics.median(rows[f"{b}-off"])
    print(f"  {b:4}: recorder on {on:8.2f} us, off {off:8.2f} us (on/off {on / off:.3f}); "
          f"recorder's work = {100 * cycle / 1000 / off:.2f}% of the call")
PY
