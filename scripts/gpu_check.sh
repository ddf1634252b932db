#!/usr/bin/env bash
# Builds libddp against the machine's own python3 torch (a CUDA wheel) and runs
# the suite there, for machines with an NVIDIA GPU (CI has none). GoogleTest
# may come from a prefix named by GTEST_ROOT when the machine has no package.
# Usage: scripts/gpu_check.sh [ctest -R regex]
# With DDP_BUILD_BENCH=1 the benchmarks are built too, and issue 13's CUDA
# step benchmark (bench/run_ddp_step_cuda.sh) runs after the tests.
# With --prebuilt it builds nothing: it runs the binaries scripts/gpu_pack.sh
# packed into .gpu/build (carry .gpu) through gpu_check_prebuilt.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${1:-}" = --prebuilt ]; then exec bash "$here/scripts/gpu_check_prebuilt.sh"; fi
build="${DDP_BUILD_DIR:-$here/build-gpu}"
py="${DDP_PYTHON:-$(command -v python3)}"
nvidia-smi -L || true
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.nccl.version() if torch.cuda.is_available() else '')"
cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDDP_PYTHON="$py" ${GTEST_ROOT:+-DGTEST_ROOT="$GTEST_ROOT"} -DDDP_BUILD_BENCH=$([ -n "${DDP_BUILD_BENCH:-}" ] && echo ON || echo OFF) >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build"
rc=0
OMP_NUM_THREADS=1 ctest --output-on-failure ${1:+-R "$1"} || rc=$?
if [ -n "${DDP_BUILD_BENCH:-}" ]; then
  DDP_BUILD_DIR="$build" DDP_PYTHON="$py" bash "$here/bench/run_ddp_step_cuda.sh" || rc=1
fi
exit $rc
