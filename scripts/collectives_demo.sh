#!/usr/bin/env bash
# The collectives demo: builds libddp and runs it on 4 ranks (CPU,
# Gloo, loopback). Every rank prints what each collective gave it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/build.sh"
build="${DDP_BUILD_DIR:-$here/build}"
world=${WORLD:-4}
port=$("$here/.venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM
for ((r = 0; r < world; r++)); do
  OMP_NUM_THREADS=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$world RANK=$r \
    "$build/examples/allreduce_demo" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
trap - EXIT
exit $rc
