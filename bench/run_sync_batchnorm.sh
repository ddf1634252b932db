#!/usr/bin/env bash
# What sync_batchnorm costs: the digits MLP with a BatchNorm1d after each
# hidden layer (export_digits.py --batchnorm), 2 CPU processes, 20 epochs,
# through train_digits with plain (per-rank) batch norms and with
# --sync-batchnorm, alternating runs. A run's step time is the mean over
# epochs 2-40 (epoch time / 23 steps: the mean, since train_digits prints
# whole milliseconds per epoch); reports each contender's median over the
# runs and the synchronised step's extra cost as a fraction of the plain step.
#   bench/run_sync_batchnorm.sh [runs per contender, default 5]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
runs=${1:-5}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$py" "$here/examples/digits/export_digits.py" "$data" --batchnorm >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
step_ms() {  # the mean step time (ms) of epochs 2-40 of one run
  OMP_NUM_THREADS=1 "$build/examples/train_digits" "$data" --world 2 --epochs 40 --ckpt "$data/last.ckpt" "$@" \
    2>/dev/null | sed -n 's/^epoch *\([0-9]*\) .*(\([0-9]*\) ms)$/\1 \2/p' |
    awk '$1 > 1 {s += $2; n++} END {printf "%.4f\n", s / n / 23}'
}
plain=() synced=()
for ((i = 1; i <= runs; i++)); do
  p=$(step_ms); s=$(step_ms --sync-batchnorm)
  echo "run $i: plain batch norm ${p} ms/step, sync_batchnorm ${s} ms/step"
  plain+=("$p"); synced+=("$s")
done
mp=$(printf '%s\n' "${plain[@]}" | median)
ms=$(printf '%s\n' "${synced[@]}" | median)
echo "median step: plain ${mp} ms, sync_batchnorm ${ms} ms; sync_batchnorm adds $(echo "scale=3; ($ms - $mp) / $mp" | bc) of the plain step"
