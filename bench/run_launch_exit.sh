#!/usr/bin/env bash
# Launch-to-exit of one C program (bench_launch worker: join, one barrier,
# exit) run three ways, alternating in one run: alone as 1 rank without a
# launcher, as 2 ranks under ddprun, and as 2 ranks under torchrun
# --no-python. Median of REPEAT runs each, and the ratios issue 13 sets:
# ddprun / alone (target <= 1.3) and torchrun / ddprun (target >= 5).
source "$(dirname "$0")/common.sh"
repeat=${REPEAT:-7}
prog="$build/bench/bench_launch"
ms_of() {  # ms_of <cmd...>: wall time of the command, which must succeed
  local t0 t1
  t0=$(mono_ns)
  "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
  t1=$(mono_ns)
  echo $(((t1 - t0) / 1000000))
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
alone="" ddprun="" torchrun=""
for i in $(seq "$repeat"); do
  alone+="$(ms_of env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT "$prog" worker) "
  ddprun+="$(ms_of "$build/tools/ddprun" --standalone --nproc-per-node 2 "$prog" worker) "
  torchrun+="$(ms_of "$here/.venv/bin/torchrun" --standalone --nproc-per-node 2 --no-python "$prog" worker) "
done
a=$(echo "$alone" | median) d=$(echo "$ddprun" | median) t=$(echo "$torchrun" | median)
printf '%-34s %10s   %s\n' "how bench_launch worker ran" "median ms" "runs (ms)"
printf '%-34s %10s   %s\n' "alone, 1 rank, no launcher" "$a" "$alone" "ddprun, 2 ranks" "$d" "$ddprun" \
  "torchrun --no-python, 2 ranks" "$t" "$torchrun"
echo "ddprun / alone:    $(echo "scale=2; $d / $a" | bc)  (issue 13: at most 1.3)"
echo "torchrun / ddprun: $(echo "scale=2; $t / $d" | bc)  (issue 13: at least 5)"
