#!/usr/bin/env bash
# Checkpoint save and load, 100 M float32 parameters with Adam's state
# (1.2 GB): libddp (bench_checkpoint: Lightning's layout in PyTorch's format,
# streamed to a temporary file, fsync, rename; loaded with every record's
# CRC checked) against torch.save / torch.load (weights_only) of the same
# state, with an fsync too (bench_checkpoint_torch.py --fsync), alternating
# runs. Before each run the old file is removed and `sync` flushes what
# earlier runs left dirty, so each run writes a fresh file to an idle disk.
# Reports each contender's median seconds and peak memory above the live
# state, and the time ratios libddp / PyTorch.
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
one() {  # contender, command...: appends "save load save_mb load_mb"
  local who=$1; shift
  rm -f "$dir"/*.ckpt; sync
  local out; out=$(OMP_NUM_THREADS=1 "$@")
  local s l sm lm
  s=$(echo "$out" | sed -n 's/^save \([0-9.]*\) s, peak +\([0-9.]*\) MB/\1/p')
  sm=$(echo "$out" | sed -n 's/^save \([0-9.]*\) s, peak +\([0-9.]*\) MB/\2/p')
  l=$(echo "$out" | sed -n 's/^load \([0-9.]*\) s, peak +\([0-9.]*\) MB/\1/p')
  lm=$(echo "$out" | sed -n 's/^load \([0-9.]*\) s, peak +\([0-9.]*\) MB/\2/p')
  echo "  $who: save $s s (peak +$sm MB), load $l s (peak +$lm MB)"
  col[$who.save]+="$s "; col[$who.load]+="$l "; col[$who.save_mb]+="$sm "; col[$who.load_mb]+="$lm "
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
  printf '  %-7s save %6.3f s (peak +%s MB)   load %6.3f s (peak +%s MB)\n' "$who" "$(m $who.save)" "$(m $who.save_mb)" \
    "$(m $who.load)" "$(m $who.load_mb)"
done
awk -v a="$(m libddp.save)" -v b="$(m torch.save)" -v c="$(m libddp.load)" -v d="$(m torch.load)" \
  -v sm="$(m libddp.save_mb)" -v size="$size_mb" \
  'BEGIN {printf "ratio libddp/torch: save %.2f, load %.2f; libddp save peak %.2f%% of the checkpoint\n", a / b, c / d, 100 * sm / size}'
