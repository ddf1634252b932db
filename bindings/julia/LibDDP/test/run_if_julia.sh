#!/usr/bin/env bash
# Runs LibDDP.jl's tests when `julia` is on PATH; otherwise says so and exits
# 77 (CTest: skipped). No Julia runtime can be installed on our machines.
#   run_if_julia.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
if ! command -v julia >/dev/null; then
  echo "SKIPPED: no julia on PATH; LibDDP.jl's runtime tests need one (the static ccall check runs regardless)"
  exit 77
fi
LIBDDP="$build/capi/libddp.so" DDPRUN="$build/tools/ddprun" OMP_NUM_THREADS=1 \
  julia --project="$src/bindings/julia/LibDDP" "$src/bindings/julia/LibDDP/test/runtests.jl"
