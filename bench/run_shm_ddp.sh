#!/usr/bin/env bash
# The DDP engine's step on the shared-memory backend against Gloo (issue 14),
# 2 ranks under ddprun, in one run: libddp's ddp::DistributedDataParallel on
# shm, the same on Gloo, and PyTorch DDP (Gloo) from Python; the MLP (~9.4 M
# parameters) and the conv net of bench_ddp_step.cpp, 25 MB buckets, plus
# libddp without communication (the compute every contender shares). The
# contenders alternate for BENCH_REPEATS (3) rounds; medians of the rounds'
# p50 step times.
source "$(dirname "$0")/common.sh"
steps=${STEPS:-20}
out=$(mktemp)
run() { "$build/tools/ddprun" --standalone --nproc-per-node 2 --local-ranks-filter 0 --python "$py" "$@" \
          | sed -n 's/^\[rank0\]: \({.*}\)$/\1/p' >>"$out"; }
for ((rep = 0; rep < ${BENCH_REPEATS:-3}; rep++)); do
  for model in mlp conv; do
    BENCH_BACKEND=shm run "$build/bench/bench_ddp_step" "$model" 25 overlap "$steps"
    BENCH_BACKEND=gloo run "$build/bench/bench_ddp_step" "$model" 25 overlap "$steps"
    run "$here/bench/bench_ddp_step_torch.py" "$model" 25 "$steps"
    BENCH_BACKEND=shm run "$build/bench/bench_ddp_step" "$model" 25 no-comm "$steps"
  done
done
"$py" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def p50(impl, model, mode="overlap"):
    v = [r["step_ms_p50"] for r in rows if r["impl"] == impl and r["model"] == model and r["mode"] == mode]
    return statistics.median(v) if v else None
print(f"{'model':6} {'libddp shm':>11} {'libddp gloo':>12} {'PyTorch DDP':>12} {'no comm':>8}   (ms per step, p50)")
for m in ("mlp", "conv"):
    shm, gloo, torch, none = p50("libddp-c++-shm", m), p50("libddp-c++-gloo", m), p50("pytorch-ddp", m), \
        p50("libddp-c++-shm", m, "no-comm")
    print(f"{m:6} {shm:11.2f} {gloo:12.2f} {torch:12.2f} {none:8.2f}   shm / gloo = {shm / gloo:.3f}, "
          f"shm / PyTorch DDP = {shm / torch:.3f}; communication per step: shm {shm - none:.2f} ms, "
          f"gloo {gloo - none:.2f} ms, PyTorch {torch - none:.2f} ms")
PY
rm -f "$out"
