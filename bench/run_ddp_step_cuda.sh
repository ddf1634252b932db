#!/usr/bin/env bash
# Issue 13's CUDA figure: the DDP step at world size 1 on one GPU (NCCL), an
# MLP 1024-4096-4096-4096-1024-10 at batch 32/256/2048, in one run: libddp's
# DDP (ddp::DistributedDataParallel, stream-ordered bucket reductions), the
# same C++ program without reduction, PyTorch DDP, and PyTorch without DDP.
# Each timed step ends in a device synchronize; ROUNDS (3) alternating rounds,
# median of the rounds' p50s. Reports each DDP's added time per step over its
# own no-DDP run (target: libddp's at most PyTorch's). Prints "skipped" and
# exits 0 where no CUDA device is visible.
source "$(dirname "$0")/common.sh"
if ! "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: no CUDA device visible (torch.cuda.is_available() is false)"
  exit 0
fi
rounds=${ROUNDS:-3} steps=${STEPS:-50}
out=$(mktemp)
export BENCH_DEVICE=cuda WORLD_SIZE=1 RANK=0 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1
for batch in 32 256 2048; do
  for ((r = 0; r < rounds; r++)); do
    BENCH_BATCH=$batch MASTER_PORT=$(port) "$build/bench/bench_ddp_step" mlp-large 25 overlap "$steps" | grep '^{' >>"$out"
    BENCH_BATCH=$batch MASTER_PORT=$(port) "$build/bench/bench_ddp_step" mlp-large 25 no-comm "$steps" | grep '^{' >>"$out"
    BENCH_BATCH=$batch MASTER_PORT=$(port) "$py" "$here/bench/bench_ddp_step_torch.py" mlp-large 25 "$steps" \
      | grep '^{' >>"$out"
    BENCH_BATCH=$batch BENCH_MODE=no-ddp MASTER_PORT=$(port) "$py" "$here/bench/bench_ddp_step_torch.py" mlp-large 25 \
      "$steps" | grep '^{' >>"$out"
  done
done
"$py" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(impl, mode, batch):
    v = [r["step_ms_p50"] for r in rows if r["impl"] == impl and r["mode"] == mode and r["batch"] == batch]
    return statistics.median(v)
print(f"{'batch':>6} {'libddp ms':>10} {'C++ no DDP':>11} {'PyTorch DDP':>12} {'PyTorch no DDP':>15} "
      f"{'libddp adds':>12} {'PyTorch adds':>13} {'ratio':>6}")
for b in (32, 256, 2048):
    lib, lib0 = med("libddp-c++", "overlap", b), med("libddp-c++", "no-comm", b)
    pt, pt0 = med("pytorch-ddp", "overlap", b), med("pytorch-ddp", "no-ddp", b)
    add_lib, add_pt = lib - lib0, pt - pt0
    ratio = add_lib / add_pt if add_pt > 0 else float("nan")
    print(f"{b:6d} {lib:10.3f} {lib0:11.3f} {pt:12.3f} {pt0:15.3f} {add_lib:12.3f} {add_pt:13.3f} {ratio:6.2f}")
print("ratio = libddp's added ms per step / PyTorch's (issue 13: at most 1)")
PY
rm -f "$out"
