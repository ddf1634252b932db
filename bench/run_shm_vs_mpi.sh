#!/usr/bin/env bash
# In-place float32 all-reduce, 4 B to BENCH_MAX_MB (256) MiB, on WORLDS
# ("2 4") ranks of this host, in one run: libddp's shm backend and its Gloo
# backend through the C API (bench_allreduce, one process group per
# process) and MPICH's MPI_Allreduce (bench_mpi_allreduce under MPICH's own
# mpiexec), timed the same way. CONTENDERS ("shm gloo mpich") may add
# "c10d" (raw ProcessGroupGloo) and "torch" (torch.distributed from Python).
# The contenders alternate for BENCH_REPEATS (3) rounds; report_vs_mpi.py
# prints the median of the rounds' p50 and p90, the ratios, and flags every
# size where shm's p50 exceeds MPICH's or its p90 exceeds 1.5x its p50.
# BENCH_OP=broadcast or all_gather times that collective instead (shm, gloo
# and mpich only). BENCH_INTERLEAVE=size runs one size per process, the
# contenders in turn for each size (slower to run, fairer where the
# machine's speed drifts within a sweep). BENCH_OP=reducer_view (or reducer)
# times DDP's bucket path on shm and Gloo (bench_allreduce.cpp) against
# MPICH's MPI_Allreduce of the same bytes.
#   bench/run_shm_vs_mpi.sh [results.jsonl]   (the JSON lines are kept there)
source "$(dirname "$0")/common.sh"
results=${1:-$(mktemp)}
: >"$results"
mpi="$build/bench/bench_mpi_allreduce"
if [ -z "${DDP_PYTHON:-}" ]; then  # with DDP_PYTHON the build is made already (a lent machine's .gpu/build)
  if command -v mpicc >/dev/null && [ ! -x "$mpi" ]; then
    cmake "$build" -UMPI_* >/dev/null
    cmake --build "$build" -j 2 --target bench_mpi_allreduce >/dev/null || true
  fi
  cmake --build "$build" -j 2 --target bench_allreduce >/dev/null
fi
export MASTER_ADDR=127.0.0.1 BENCH_ROUNDS=1 BENCH_MAX_MB=${BENCH_MAX_MB:-256}
run_ranks() {  # run_ranks <world> <cmd...>: one process per rank; rank 0's JSON lines, tagged with the world
  local world=$1 pids=() r
  shift
  for ((r = 0; r < world; r++)); do
    if [ $r -eq 0 ]; then
      WORLD_SIZE=$world RANK=$r "$@" | sed "s/^{/{\"world\": $world, /" >>"$results" &
    else
      WORLD_SIZE=$world RANK=$r "$@" >/dev/null &
    fi
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || echo "{\"world\": $world, \"impl\": \"$label\", \"failed\": true}" >>"$results"; done
}
mpi_op() {  # what MPICH times for BENCH_OP: a bucket's reduction is an all-reduce of its bytes there
  case ${BENCH_OP:-allreduce} in reducer | reducer_view) echo allreduce ;; *) echo "${BENCH_OP:-allreduce}" ;; esac
}
contender() {  # contender <name> <world>
  label=$1
  case $1 in
    shm | gloo) BENCH_IMPL=capi BENCH_BACKEND=$1 MASTER_PORT=$(port) run_ranks "$2" "$build/bench/bench_allreduce" ;;
    c10d) BENCH_IMPL=c10d MASTER_PORT=$(port) run_ranks "$2" "$build/bench/bench_allreduce" ;;
    torch) TORCH_PORT=$(port) run_ranks "$2" "$py" "$here/bench/bench_allreduce_torch.py" ;;
    mpich)
      if [ ! -x "$mpi" ] || ! command -v mpiexec >/dev/null; then
        echo "{\"world\": $2, \"impl\": \"mpich\", \"failed\": true, \"why\": \"no MPICH (apt-get install mpich libmpich-dev)\"}" >>"$results"
      elif ! BENCH_OP=$(mpi_op) mpiexec -n "$2" "$mpi" | sed "s/^{/{\"world\": $2, /" >>"$results"; then
        echo "{\"world\": $2, \"impl\": \"mpich\", \"failed\": true}" >>"$results"
      fi ;;
    *) echo "unknown contender $1" >&2; exit 2 ;;
  esac
}
rounds() {  # rounds <world>: BENCH_REPEATS rounds of every contender in turn
  for ((rep = 0; rep < ${BENCH_REPEATS:-3}; rep++)); do
    for c in ${CONTENDERS:-shm gloo mpich}; do contender "$c" "$1"; done
  done
}
for world in ${WORLDS:-2 4}; do
  if [ "${BENCH_INTERLEAVE:-}" = size ]; then
    # One size per run, the contenders in turn for each size. On our 2-core
    # VMs the speed of moving data between the cores changes every few
    # seconds (the host moving the vCPUs; 1 MiB broadcasts on 2 ranks held
    # 35-45, about 62 or 240-315 us for seconds at a time), so a contender
    # whose whole sweep fell in a slow stretch looked slower at every size.
    # Finer turns spread the stretches over the contenders.
    max=${BENCH_MAX_BYTES:-$((BENCH_MAX_MB << 20))}
    for ((b = ${BENCH_MIN_BYTES:-4}; b <= max; b *= 4)); do
      BENCH_MIN_BYTES=$b BENCH_MAX_BYTES=$b rounds "$world"
    done
  else
    rounds "$world"
  fi
done
"$py" "$here/bench/report_vs_mpi.py" "$results"
