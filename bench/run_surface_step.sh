#!/usr/bin/env bash
# The training surface's cost (issue 24): the two-input, dict-output module
# with the composite loss written in C (tests/surface/surface_job.c, bench
# mode: 2 ranks, the step time after 20 warm-up steps; on libddp's default
# shared-memory backend and on Gloo) against the same script in Python on
# PyTorch DDP over Gloo (tests/surface/surface_reference.py),
# alternating runs, the median of each and the ratio; then the C
# arithmetic's cost per operator over the ATen call it wraps
# (bench_surface_ops).
#   bench/run_surface_step.sh [runs per contender, default 5] [steps, default 300]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
runs=${1:-5}
steps=${2:-300}
dir=$(mktemp -d "${TMPDIR:-/tmp}/surface_bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$py" "$here/tests/surface/export_surface.py" "$dir"
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rank0() { sed -n 's/^rank 0 step_ms \([0-9.]*\)$/\1/p'; }
libddp=() gloo=() torch=()
echo "surface step (2 ranks, $steps steps, $runs alternating runs, $(nproc) cores)"
for ((i = 1; i <= runs; i++)); do
  a=$(OMP_NUM_THREADS=1 "$build/tests/surface_job" "$dir" "$steps" bench | rank0)
  g=$(SURFACE_BACKEND=gloo OMP_NUM_THREADS=1 "$build/tests/surface_job" "$dir" "$steps" bench | rank0)
  p=$(port)
  for r in 1 0; do
    RANK=$r WORLD_SIZE=2 TORCH_PORT=$p OMP_NUM_THREADS=1 "$py" "$here/tests/surface/surface_reference.py" "$steps" - bench \
      >"$dir/ref$r.out" &
  done
  wait
  b=$(rank0 <"$dir/ref0.out")
  echo "  run $i: libddp $a ms, libddp on Gloo $g ms, PyTorch DDP $b ms"
  libddp+=("$a") gloo+=("$g") torch+=("$b")
done
ml=$(printf '%s\n' "${libddp[@]}" | median) mg=$(printf '%s\n' "${gloo[@]}" | median)
mt=$(printf '%s\n' "${torch[@]}" | median)
awk -v a="$ml" -v g="$mg" -v b="$mt" 'BEGIN {printf "median step: libddp %.3f ms, libddp on Gloo %.3f ms, PyTorch DDP %.3f ms; ratios %.2f, %.2f\n", a, g, b, a / b, g / b}'
echo
"$build/bench/bench_surface_ops"
