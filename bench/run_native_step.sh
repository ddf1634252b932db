#!/usr/bin/env bash
# A model written in LibTorch's C++ API, trained at 2 ranks on this host
# (OMP_NUM_THREADS=1 each), in one run: libddp's ddp::Strategy from C++,
# PyTorch DDP from Python (both started by ddprun), and dist-mnist's
# hand-written loop over MPICH (MPI_Allreduce of each gradient after
# backward, started by mpiexec). Models: dist-mnist's conv net (batch 64)
# and the digits MLP (batch 32). Each round runs every contender once, in
# turn; a contender's figure is the median over rounds of its median step.
#   bench/run_native_step.sh [rounds, default 5]     (STEPS: steps per run, 200)
# Installs Debian's MPICH when mpiexec is missing (the MPI contender is
# left out, with a line saying so, where that fails).
source "$(dirname "$0")/common.sh"
rounds=${1:-5}
steps=${STEPS:-200}
if ! command -v mpicxx >/dev/null; then
  apt-get install -y -q mpich libmpich-dev >/dev/null 2>&1 || echo "MPICH could not be installed: no MPI contender"
fi
mpi="$build/bench/bench_native_step_mpi"
if command -v mpicxx >/dev/null && [ ! -x "$mpi" ]; then
  cmake "$build" -UMPI_* >/dev/null
  cmake --build "$build" -j 2 --target bench_native_step_mpi >/dev/null
fi
cmake --build "$build" -j 2 --target bench_native_step >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ddprun_run() {
  "$build/tools/ddprun" --standalone --nproc-per-node 2 --local-ranks-filter 0 --python "$py" "$@" |
    sed -n 's/^\[rank0\]: \({.*}\)$/\1/p' >>"$out"
}
for ((r = 1; r <= rounds; r++)); do
  for model in mnist digits; do
    ddprun_run "$build/bench/bench_native_step" "$model" "$steps"
    ddprun_run "$here/bench/bench_native_step_torch.py" "$model" "$steps"
    if [ -x "$mpi" ]; then mpiexec -n 2 "$mpi" "$model" "$steps" | grep '^{' >>"$out"; fi
  done
done
"$py" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for r in rows:
    med.setdefault((r["model"], r["impl"]), []).append(r["step_ms_p50"])
print(f"{'model':7} {'contender':22} {'runs':>4} {'step ms (median)':>17}")
for (m, i), v in sorted(med.items()):
    print(f"{m:7} {i:22} {len(v):4} {statistics.median(v):17.4f}")
for m in ("mnist", "digits"):
    lib = med.get((m, "libddp-strategy-c++"))
    line = f"{m}: ddp::Strategy / PyTorch DDP = {statistics.median(lib) / statistics.median(med[(m, 'pytorch-ddp')]):.3f}"
    if (m, "mpi-allreduce-loop") in med:
        line += f"; ddp::Strategy / the MPI loop = {statistics.median(lib) / statistics.median(med[(m, 'mpi-allreduce-loop')]):.3f}"
    print(line)
PY
