#!/usr/bin/env bash
# Every benchmark, side by side with its peers, in one invocation; writes
# bench/results/REPORT.md and its PNG plots (bench/make_report.py).
#
#   scripts/bench.sh            the full run (all_reduce 4 B-256 MiB on 2 and,
#                               with 4+ cores, 4 ranks, 3 alternating rounds;
#                               DDP step of MLP and conv net; digits job;
#                               launchers; comm hooks on loopback and a
#                               shaped 1 Gbit/s veth; per-call binding cost)
#   scripts/bench.sh --quick    under 5 minutes: one round, 2 ranks, the MLP
#                               step, launch times; the rest says "skipped"
#   scripts/bench.sh --gpu      adds the CUDA section (NCCL) where a GPU is
#
# Each section runs its bench/run_*.sh with a time limit; its output is kept
# in bench/results/raw/, and a section that fails or times out is reported
# as failed, with its last lines, not dropped. Needs what the README's
# bootstrap installs, plus MPICH (installed here when missing) and
# matplotlib in .venv (installed here when missing; without it the report
# has no plots and says so).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
quick=0 gpu=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    --gpu) gpu=1 ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "scripts/bench.sh: unknown argument $a (--quick, --gpu)" >&2; exit 2 ;;
  esac
done
results="$here/bench/results"
raw="$results/raw"
rm -rf "$raw"
mkdir -p "$raw"
status="$raw/status.tsv"
: >"$status"
started=$(date +%s)

"$here/scripts/build.sh" >/dev/null || { echo "scripts/bench.sh: the build failed" >&2; exit 1; }
py="$here/.venv/bin/python"
export OMP_NUM_THREADS=1
if ! command -v mpiexec >/dev/null || ! command -v mpicc >/dev/null; then
  apt-get install -y -q mpich libmpich-dev >/dev/null 2>&1 || echo "MPICH could not be installed: its rows say failed"
fi
"$py" -c 'import matplotlib' 2>/dev/null ||
  "$here/.venv/bin/pip" install --quiet --no-cache-dir matplotlib >/dev/null 2>&1 ||
  echo "matplotlib could not be installed: the report has no plots"

# section <name> <time limit s> <command...>: runs it, output to raw/<name>.txt
section() {
  local name=$1 limit=$2 t0 rc
  shift 2
  echo "== $name"
  t0=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" >"$raw/$name.txt" 2>&1
  rc=$?
  local secs=$(($(date +%s) - t0))
  if [ $rc -eq 0 ]; then
    printf '%s\tok\t%s\n' "$name" "$secs" >>"$status"
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    printf '%s\tfailed: over its %s s limit\t%s\n' "$name" "$limit" "$secs" >>"$status"
  else
    printf '%s\tfailed: exit %s\t%s\n' "$name" "$rc" "$secs" >>"$status"
  fi
  tail -n 3 "$raw/$name.txt" | sed 's/^/   /'
}
skip() { printf '%s\tskipped: %s\t0\n' "$1" "$2" >>"$status"; echo "== $1: skipped ($2)"; }

cores=$(nproc)
section machine 120 bash "$here/bench/machine_info.sh" "$raw/machine.json"
if [ $quick -eq 1 ]; then
  WORLDS=2 BENCH_REPEATS=1 CONTENDERS="shm gloo c10d torch mpich" \
    section allreduce 150 bash "$here/bench/run_shm_vs_mpi.sh" "$raw/allreduce.jsonl"
  MODELS=mlp CAPS=25 STEPS=15 section ddp_step 120 bash "$here/bench/run_ddp_step.sh" "$raw/ddp_step.jsonl"
  REPEAT=3 section launch_exit 60 bash "$here/bench/run_launch_exit.sh"
  skip launch "--quick (launch_exit times ddprun and torchrun)"
  skip digits "--quick"
  skip hooks "--quick"
  skip bindings "--quick"
else
  worlds=2
  [ "$cores" -ge 4 ] && worlds="2 4"
  WORLDS=$worlds BENCH_REPEATS=3 CONTENDERS="shm gloo c10d torch mpich" \
    section allreduce 1500 bash "$here/bench/run_shm_vs_mpi.sh" "$raw/allreduce.jsonl"
  MODELS="mlp conv" CAPS=25 STEPS=30 section ddp_step 900 bash "$here/bench/run_ddp_step.sh" "$raw/ddp_step.jsonl"
  section digits 1200 bash "$here/bench/run_digits.sh" 3
  REPEAT=7 section launch_exit 300 bash "$here/bench/run_launch_exit.sh"
  REPEAT=5 section launch 600 bash "$here/bench/run_launch.sh"
  section hooks 1200 bash "$here/bench/run_hooks.sh"
  section bindings 900 bash "$here/bench/run_binding_cost.sh" 5
fi
if [ $gpu -eq 1 ]; then
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    section gpu_ddp_step 900 bash "$here/bench/run_ddp_step_cuda.sh"
  else
    skip gpu_ddp_step "no CUDA device on this machine"
  fi
fi
mode=full
[ $quick -eq 1 ] && mode=quick
"$py" "$here/bench/make_report.py" "$results" "$mode" "$(($(date +%s) - started))"
echo "scripts/bench.sh: wrote $results/REPORT.md in $(($(date +%s) - started)) s"
