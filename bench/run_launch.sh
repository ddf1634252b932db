#!/usr/bin/env bash
# Launch call -> first completed barrier, 2 and 4 ranks, in one run:
# ddp_spawn (popen, fork) and ddprun vs torch.multiprocessing.spawn and
# torchrun running the same barrier in Python. Median of REPEAT runs each.
source "$(dirname "$0")/common.sh"
repeat=${REPEAT:-5}
median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# launcher_ms <cmd...>: runs a launcher whose rank 0 prints barrier_ns=...; ms since the call
launcher_ms() {
  local t0 out
  t0=$(mono_ns)
  out=$("$@" 2>/dev/null | grep -o 'barrier_ns=[0-9]*' | head -1 | cut -d= -f2)
  echo "scale=1; ($out - $t0) / 1000000" | bc
}
printf '%-18s %6s %11s %22s %16s\n' "launcher" "ranks" "median ms" "x faster than mp.spawn" "x faster than torchrun"
for n in 2 4; do
  declare -A ms=()
  for i in $(seq "$repeat"); do
    ms[ddp_spawn_popen]+="$("$build/bench/bench_launch" spawn popen "$n" | cut -d= -f2) "
    ms[ddp_spawn_fork]+="$("$build/bench/bench_launch" spawn fork "$n" | cut -d= -f2) "
    ms[ddprun]+="$(launcher_ms "$build/tools/ddprun" --standalone --nproc-per-node "$n" "$build/bench/bench_launch" worker) "
    ms[torch_mp_spawn]+="$(BENCH_PORT=$(port) "$py" "$here/bench/bench_launch_torch.py" mp "$n" 2>/dev/null | cut -d= -f2) "
    ms[torchrun]+="$(launcher_ms "$here/.venv/bin/torchrun" --standalone --nproc-per-node "$n" "$here/bench/bench_launch_torch.py" worker) "
  done
  declare -A med=()
  for k in "${!ms[@]}"; do med[$k]=$(echo "${ms[$k]}" | tr ' ' '\n' | grep . | median); done
  for k in ddp_spawn_popen ddp_spawn_fork ddprun torch_mp_spawn torchrun; do
    printf '%-18s %6s %11s %22s %16s\n' "$k" "$n" "${med[$k]}" \
      "$(echo "scale=1; ${med[torch_mp_spawn]} / ${med[$k]}" | bc)" "$(echo "scale=1; ${med[torchrun]} / ${med[$k]}" | bc)"
  done
  unset ms med
done
