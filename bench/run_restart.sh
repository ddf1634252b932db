#!/usr/bin/env bash
# Issue 25: time from a rank's death to the first training step of the
# restarted job. The digits job (2 ranks, a checkpoint every 10 steps in a
# directory it resumes from by itself) SIGKILLs rank 1 after step 30; the
# launcher restarts both ranks, which resume from step 30's checkpoint. The
# same C program under ddprun and under torchrun's elastic agent
# (--no-python), alternating, REPEAT runs each; medians and the ratio.
# The killed rank prints its wall clock just before SIGKILL; rank 0 prints
# it after its first step after the resume.
source "$(dirname "$0")/common.sh"
repeat=${REPEAT:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/examples/digits/export_digits.py" "$work" >/dev/null
seconds_of() {  # seconds_of <launcher...>: kill to first resumed step, from the job's own lines
  rm -rf "$work/ckpts"
  local out
  out=$(DIGITS_KILL_RANK=1 DIGITS_KILL_AT_STEP=30 "$@" "$build/examples/train_digits" "$work" --launcher popen \
    --world 2 --epochs 2 --ckpt-dir "$work/ckpts" --every-n-steps 10 2>&1) || { echo "failed: $*: $out" >&2; exit 1; }
  local killed first
  killed=$(echo "$out" | sed -n 's/.*SIGKILL to itself after step 30 (DIGITS_KILL_AT_STEP) at \([0-9.]*\).*/\1/p' | head -1)
  first=$(echo "$out" | sed -n 's/.*first step after the resume at \([0-9.]*\).*/\1/p' | head -1)
  [ -n "$killed" ] && [ -n "$first" ] || { echo "no kill or resume line from $*: $out" >&2; exit 1; }
  echo "$first - $killed" | bc -l | awk '{printf "%.3f", $1}'
}
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
ddprun="" torchrun=""
for i in $(seq "$repeat"); do
  ddprun+="$(seconds_of "$build/tools/ddprun" --standalone --nproc-per-node 2 --max-restarts 1) "
  torchrun+="$(seconds_of "$here/.venv/bin/torchrun" --standalone --nproc-per-node 2 --max-restarts 1 --no-python) "
done
d=$(echo "$ddprun" | median) t=$(echo "$torchrun" | median)
printf '%-40s %10s   %s\n' "launcher (digits job, 2 ranks)" "median s" "runs (s): a rank's SIGKILL to the first resumed step"
printf '%-40s %10s   %s\n' "ddprun --max-restarts 1" "$d" "$ddprun" "torchrun --max-restarts 1 --no-python" "$t" "$torchrun"
echo "torchrun / ddprun: $(echo "scale=2; $t / $d" | bc)  (issue 25: ddprun under 10 s and under torchrun)"
