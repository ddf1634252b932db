#!/usr/bin/env bash
# Checkpoint save and load, 100 M float32 parameters with Adam's state
# (1.2 GB): libddp (bench_checkpoint: Lightning's layout in PyTorch's format,
# streamed to a temporary file, fsync, rename; loaded with every record's
# CRC checked) against torch.save / torch.load (weights_only) of the same
# state, with an fsync too (bench_checkpoint_torch.py --fsync), alternating
# runs. Before each run the old file is removed and `sync` flushes what
# earlier runs left dirty, so each run writes a fresh file to an idle disk.
# Reports each contender's median seconds and peak memory above the live
# state (VmHWM, which counts a mapped file's pages, and the anonymous memory
# the process itself holds), and the time ratios libddp / PyTorch.
#   bench/run_checkpoint.sh [runs per contender, default 5] [parameters, default 100000000]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
runs=${1:-5}
params=${2:-100000000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/ckpt_bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
declare -A col
field() {  # phase, field number (1 seconds, 2 peak MB, 3 anon MB) of a bench line
  sed -n "s/^$1 \([0-9.]*\) s, peak +\([0-9.]*\) MB, anon +\([-0-9.]*\) MB/\\$2/p"
}
one() {  # contender, command...: appends each figure to its column
  local who=$1; shift
  rm -f "$dir"/*.ckpt; sync
  local out; out=$(OMP_NUM_THREADS=1 "$@")
  local s l sm lm sa la
  s=$(echo "$out" | field save 1); sm=$(echo "$out" | field save 2); sa=$(echo "$out" | field save 3)
  l=$(echo "$out" | field load 1); lm=$(echo "$out" | field load 2); la=$(echo "$out" | field load 3)
  echo "  $who: save $s s (peak +$sm MB, anon +$sa MB), load $l s (peak +$lm MB, anon +$la MB)"
  col[$who.save]+="$s "; col[$who.load]+="$l "; col[$who.save_mb]+="$sm "; col[$who.load_mb]+="$lm "
  col[$who.save_anon]+="$sa "; col[$who.load_anon]+="$la "
}
echo "checkpoint of $params float32 parameters + Adam state, $runs alternating runs each ($(nproc) cores)"
for ((i = 1; i <= runs; i++)); do
  echo "run $i"
  one libddp "$build/bench/bench_checkpoint" "$dir/libddp.ckpt" "$params"
  one torch "$py" "$here/bench/bench_checkpoint_torch.py" "$dir/torch.ckpt" "$params" --fsync
done
m() { echo "${col[$1]}" | tr ' ' '\n' | grep . | median; }
size_mb=$(awk -v p="$params" 'BEGIN {printf "%.0f", p * 3 * 4 / 1048576}')
printf '\nmedians (checkpoint %s MB):\n' "$size_mb"
for who in libddp torch; do
  printf '  %-7s save %6.3f s (peak +%s MB, anon +%s MB)   load %6.3f s (peak +%s MB, anon +%s MB)\n' "$who" \
    "$(m $who.save)" "$(m $who.save_mb)" "$(m $who.save_anon)" "$(m $who.load)" "$(m $who.load_mb)" "$(m $who.load_anon)"
done
awk -v a="$(m libddp.save)" -v b="$(m torch.save)" -v c="$(m libddp.load)" -v d="$(m torch.load)" \
  -v sm="$(m libddp.save_mb)" -v la="$(m libddp.load_anon)" -v size="$size_mb" \
  'BEGIN {printf "ratio libddp/torch: save %.2f, load %.2f; libddp save peak %.2f%%, load anonymous peak %.2f%% of the checkpoint\n", a / b, c / d, 100 * sm / size, 100 * la / size}'
