# Sourced by the bench/run_*.sh scripts: builds (quietly) and defines
#   here (repository root), build (build directory), py (the venv's python,
#   or DDP_PYTHON's, which skips the bootstrap and the build),
#   port (prints a free TCP port on 127.0.0.1).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
if [ -n "${DDP_PYTHON:-}" ]; then
  # A machine without the bootstrap (a lent GPU machine): its own python
  # with torch, and a build made already (DDP_BUILD_BENCH=1 scripts/gpu_check.sh).
  py=$DDP_PYTHON
else
  "$here/scripts/build.sh" >/dev/null
  py="$here/.venv/bin/python"
fi
export OMP_NUM_THREADS=1
# Nanoseconds on CLOCK_MONOTONIC (bench/mono_ns.c says why not `date`).
mono_ns() { "$build/bench/mono_ns"; }
port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
