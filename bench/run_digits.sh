#!/usr/bin/env bash
# The main job against Lightning on the same work (the digits MLP, 2 CPU
# processes, 20 epochs; bench/digits_lightning.py), alternating runs, each
# timed from launch to exit by this script the same way. Prints each run's
# wall time and held-out accuracy, then the medians and their ratio.
#   bench/run_digits.sh [runs per contender, default 3]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
runs=${1:-3}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
"$py" "$here/examples/digits/export_digits.py" "$data" >/dev/null
timed() {  # prints "<seconds> <accuracy>"
  local t0 t1 out
  t0=$(date +%s.%N)
  out=$(OMP_NUM_THREADS=1 "$@" 2>/dev/null)
  t1=$(date +%s.%N)
  echo "$(echo "$t1 - $t0" | bc) $(echo "$out" | sed -n 's/^held-out accuracy \([0-9.]*\).*/\1/p')"
}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ours=() theirs=()
for ((i = 1; i <= runs; i++)); do
  read -r s acc < <(timed "$build/examples/train_digits" "$data" --world 2)
  echo "libddp    run $i: ${s} s, held-out accuracy $acc"; ours+=("$s")
  read -r s acc < <(timed "$py" "$here/bench/digits_lightning.py" "$data" --world 2)
  echo "Lightning run $i: ${s} s, held-out accuracy $acc"; theirs+=("$s")
done
m_ours=$(printf '%s\n' "${ours[@]}" | median)
m_theirs=$(printf '%s\n' "${theirs[@]}" | median)
echo "median launch to result: libddp ${m_ours} s, Lightning ${m_theirs} s; libddp takes $(echo "scale=3; $m_ours / $m_theirs" | bc)x Lightning's time"
