#!/usr/bin/env bash
# The main job end to end: the digits MLP trained from C through the
# strategy on 2 ranks reaches >= 97% held-out; a run stopped after 10 epochs
# and resumed from its checkpoint ends exactly where an uninterrupted run
# does; a damaged checkpoint is refused on every rank with DDP_E_IO; the
# popen start method (the strategy starts rank 1) gives the same result, and
# starts nothing under ddprun; a failing rank is named by the others.
#   test_digits_job.sh <build dir> <source dir> <python>
set -euo pipefail
build=$1 src=$2 py=$3
"$py" -c "import sklearn" 2>/dev/null || { echo "skipped: scikit-learn is not in $py's environment (scripts/bootstrap.sh installs it)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/examples/digits/export_digits.py" "$work" >/dev/null
job() { OMP_NUM_THREADS=1 "$build/examples/train_digits" "$work" --world 2 "$@"; }
# Runs a command that must fail, not time out; prints what it said.
must_fail() {
  local out rc
  set +e
  out=$("$@" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: exit $rc from: $*"; return 1; }
  echo "$out"
}
# Both ranks' lines in $1 match the pattern $2, RANK standing for the rank.
each_rank_says() {
  local r
  for r in 0 1; do
    grep -q "${2//RANK/$r}" <<<"$1" || { echo "FAIL: rank $r did not say '${2//RANK/$r}': $1"; exit 1; }
  done
}

full=$(job --ckpt "$work/full.ckpt")
echo "$full" | tail -2
acc=$(echo "$full" | sed -n 's/^held-out accuracy \([0-9.]*\).*/\1/p')
[ -n "$acc" ] || { echo "FAIL: no held-out accuracy line"; exit 1; }
awk -v a="$acc" 'BEGIN { exit !(a >= 0.97) }' || { echo "FAIL: held-out accuracy $acc < 0.97"; exit 1; }
[ "$(echo "$full" | grep -c '^epoch')" -eq 20 ] || { echo "FAIL: not 20 epoch lines"; exit 1; }

job --epochs 10 --ckpt "$work/part.ckpt" >/dev/null
resumed=$(job --resume --ckpt "$work/part.ckpt")
grep -q "^resumed from .* after epoch 9 (step 230)" <<<"$resumed" || { echo "FAIL: $resumed"; exit 1; }
# Loss and accuracy of epochs 11..20, and the held-out result, as the uninterrupted run's.
figures() { grep -E '^epoch|^held-out' | sed 's/  [0-9]* samples\/s.*//; s/, 2 processes.*//'; }
diff <(echo "$full" | figures | tail -11) <(echo "$resumed" | figures) || { echo "FAIL: the resumed run differs"; exit 1; }

head -c 100 "$work/full.ckpt" >"$work/cut.ckpt"
set +e
bad=$(job --resume --ckpt "$work/cut.ckpt" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] || { echo "FAIL: a truncated checkpoint was accepted"; exit 1; }
for r in 0 1; do
  grep -q "\[rank $r\] ddp_strategy_load_checkpoint.*i/o error: checkpoint .*cut.ckpt" <<<"$bad" ||
    { echo "FAIL: rank $r did not report the damaged checkpoint: $bad"; exit 1; }
done
# popen: this process is rank 0 and starts rank 1 from setup_environment.
# (Also resuming after a failed run, below.)
popen=$(job --launcher popen --epochs 3 --ckpt "$work/popen.ckpt")
spawned=$(job --epochs 3 --ckpt "$work/spawn.ckpt")
diff <(echo "$popen" | figures) <(echo "$spawned" | figures) || { echo "FAIL: popen and spawn differ"; exit 1; }
# Under ddprun the ranks exist already: the strategy must start nothing (else 4 processes meet in a world of 2).
under=$(OMP_NUM_THREADS=1 "$build/tools/ddprun" --standalone --nproc-per-node 2 "$build/examples/train_digits" "$work" \
  --launcher popen --world 2 --epochs 3 --ckpt "$work/ddprun.ckpt")
diff <(echo "$under" | sed -n 's/^\[rank0\]: //p' | figures) <(echo "$spawned" | figures) ||
  { echo "FAIL: under ddprun: $under"; exit 1; }
# devices auto (the default): under ddprun the launcher's count, with no launcher 1 process; an
# explicit count that disagrees with the launcher stops the job, naming both numbers.
for n in 2 4; do
  auto=$(OMP_NUM_THREADS=1 "$build/tools/ddprun" --standalone --nproc-per-node $n "$build/examples/train_digits" "$work" \
    --launcher popen --devices-auto --epochs 1 --ckpt "$work/auto$n.ckpt")
  grep -q "^\[rank0\]: held-out accuracy .*, $n processes" <<<"$auto" || { echo "FAIL: devices auto under ddprun $n: $auto"; exit 1; }
done
alone=$(job --launcher popen --devices-auto --epochs 1 --ckpt "$work/alone.ckpt")
grep -q "held-out accuracy .*, 1 processes" <<<"$alone" || { echo "FAIL: devices auto with no launcher: $alone"; exit 1; }
disagree=$(must_fail env OMP_NUM_THREADS=1 timeout 120 "$build/tools/ddprun" --standalone --nproc-per-node 2 \
  "$build/examples/train_digits" "$work" --launcher popen --world 3 --epochs 1 --ckpt "$work/disagree.ckpt") ||
  { echo "$disagree"; exit 1; }
# The first rank to check names both numbers and ends the job; ddprun may stop the other before
# it gets as far (under load), so one rank's message and the launcher's root cause are required.
grep -q "^\[rank[01]\]: .*devices=3 but the torchelastic environment started 2" <<<"$disagree" ||
  { echo "FAIL: no rank named the disagreeing count: $disagree"; exit 1; }
grep -q "Root Cause" <<<"$disagree" || { echo "FAIL: ddprun named no root cause: $disagree"; exit 1; }
# A rank that fails: rank 0 stops with a status naming it (popen), the spawner names the root cause (spawn).
for launcher in popen spawn; do
  set +e
  failed=$(DIGITS_FAIL_RANK=1 timeout 120 "$build/examples/train_digits" "$work" --world 2 --launcher $launcher \
    --ckpt "$work/fail.ckpt" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || { echo "FAIL: $launcher: exit $rc with a failing rank"; exit 1; }
  grep -qE "local rank 1 \(pid [0-9]+\) ended with exit code 3|rank 1 \(pid [0-9]+\) failed first with exit code 3" <<<"$failed" ||
    { echo "FAIL: $launcher: the failing rank is not named: $failed"; exit 1; }
done
# A checkpoint rank 0 cannot write is a status on every rank, not a hang.
unsaved=$(must_fail timeout 120 "$build/examples/train_digits" "$work" --world 2 --epochs 1 \
  --ckpt "$work/missing/dir/x.ckpt") || { echo "$unsaved"; exit 1; }
each_rank_says "$unsaved" "\[rank RANK\] ddp_strategy_save_checkpoint.*global rank 0 could not save"
# The failed run left its epoch-1 checkpoint: resuming from it ends as the uninterrupted 3-epoch run.
after=$(job --resume --epochs 3 --ckpt "$work/fail.ckpt")
diff <(echo "$after" | figures) <(echo "$spawned" | figures | tail -3) ||
  { echo "FAIL: resuming after the failure differs: $after"; exit 1; }
echo "digits job: devices auto as the launcher's 2 and 4 and 1 alone, a disagreeing count named and the job stopped"
echo "digits job: accuracy $acc, resume exact, damaged checkpoint refused, popen = spawn, nothing started under ddprun, failing rank named, resume after the failure exact"
