#!/usr/bin/env bash
# The main job against Lightning on the same work (the digits MLP, 2 CPU
# processes, 20 epochs; bench/digits_lightning.py), alternating runs, each
# timed from launch to exit by this script the same way. Prints each run's
# wall time and held-out accuracy, then the medians and their ratio; then
# the per-step overhead of each: the median step time of epochs 2-20 (epoch
# time / 23 steps) minus the same model's single-process compute time per
# step (forward, loss, backward, SGD on a batch of 32, plain PyTorch, one
# thread), measured in the same run.
# DIGITS_ARGS (say "--precision bf16-mixed") is given to both contenders,
# DIGITS_EXPORT_ARGS (say "--unused") to export_digits.py.
#   bench/run_digits.sh [runs per contender, default 3]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
runs=${1:-3}
read -r -a extra <<<"${DIGITS_ARGS:-}"
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
read -r -a export_extra <<<"${DIGITS_EXPORT_ARGS:-}"
"$py" "$here/examples/digits/export_digits.py" "$data" "${export_extra[@]}" >/dev/null
steps_ms="$data/steps"
timed() {  # prints "<seconds> <accuracy>"; appends epoch 2..20 times (ms) to $steps_ms.<tag>
  local tag=$1 t0 t1 out
  shift
  t0=$("$build/bench/mono_ns")  # CLOCK_MONOTONIC: bench/mono_ns.c says why not `date`
  out=$(OMP_NUM_THREADS=1 "$@" 2>/dev/null)
  t1=$("$build/bench/mono_ns")
  echo "$out" | sed -n 's/^\(\[rank0\]: \)\{0,1\}epoch *\([0-9]*\) .*(\([0-9]*\) ms)$/\2 \3/p' | awk '$1 > 1 {print $2}' >>"$steps_ms.$tag"
  echo "$(echo "$t0 $t1" | awk '{printf "%.3f", ($2 - $1) / 1e9}') $(echo "$out" | sed -n 's/^held-out accuracy \([0-9.]*\).*/\1/p')"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ours=() theirs=()
for ((i = 1; i <= runs; i++)); do
  read -r s acc < <(timed ours "$build/examples/train_digits" "$data" --world 2 "${extra[@]}")
  echo "libddp    run $i: ${s} s, held-out accuracy $acc"; ours+=("$s")
  read -r s acc < <(timed theirs "$py" "$here/bench/digits_lightning.py" "$data" --world 2 "${extra[@]}")
  echo "Lightning run $i: ${s} s, held-out accuracy $acc"; theirs+=("$s")
done
m_ours=$(printf '%s\n' "${ours[@]}" | median)
m_theirs=$(printf '%s\n' "${theirs[@]}" | median)
echo "median launch to result: libddp ${m_ours} s, Lightning ${m_theirs} s; libddp takes $(echo "scale=3; $m_ours / $m_theirs" | bc)x Lightning's time"
compute_ms=$(OMP_NUM_THREADS=1 "$py" - "$here/examples/digits" <<'PY'
import sys, time, torch
sys.path.insert(0, sys.argv[1])
from export_digits import model, split
torch.set_num_threads(1)
x, y, _, _ = split()
x, y = torch.from_numpy(x), torch.from_numpy(y)
net = model()
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
def step(i):
    b = slice((i * 32) % 1408, (i * 32) % 1408 + 32)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x[b]), y[b]).backward()
    opt.step()
for i in range(50): step(i)
times = []
for rep in range(5):
    t0 = time.perf_counter()
    for i in range(200): step(i)
    times.append((time.perf_counter() - t0) / 200 * 1000)
print(f"{sorted(times)[2]:.4f}")
PY
)
step_of() { median <"$steps_ms.$1" | awk '{printf "%.4f", $1 / 23}'; }
s_ours=$(step_of ours)
s_theirs=$(step_of theirs)
o_ours=$(echo "$s_ours - $compute_ms" | bc -l)
o_theirs=$(echo "$s_theirs - $compute_ms" | bc -l)
printf 'per step (epochs 2-20, 23 steps each): libddp %.3f ms, Lightning %.3f ms; single-process compute %.3f ms\n' \
  "$s_ours" "$s_theirs" "$compute_ms"
printf 'per-step overhead: libddp %.3f ms, Lightning %.3f ms; libddp has %.3fx Lightning'"'"'s overhead\n' \
  "$o_ours" "$o_theirs" "$(echo "$o_ours / $o_theirs" | bc -l)"
