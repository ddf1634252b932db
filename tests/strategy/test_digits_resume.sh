#!/usr/bin/env bash
# A job that resumes by itself (issue 25): the digits job under
# `ddprun --max-restarts 2` with --ckpt-dir (ddp_strategy_save_checkpoint_to_dir
# and ddp_strategy_resume_from_dir). A rank SIGKILLed mid-epoch: the restarted
# job goes on from the newest checkpoint, at an epoch's end or inside an
# epoch, and every batch's loss after it and the held-out result equal an
# undisturbed run's; keep-last holds; a damaged newest file and one that a
# rank cannot see are passed over for the newest that every rank loads, and
# when no file loads on every rank, every rank says so; another world size
# re-shards the rest of the epoch.
#   test_digits_resume.sh <build dir> <source dir> <python>
set -euo pipefail
build=$1 src=$2 py=$3
"$py" -c "import sklearn" 2>/dev/null || { echo "skipped: scikit-learn is not in $py's environment (scripts/bootstrap.sh installs it)"; exit 77; }
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
"$py" "$src/examples/digits/export_digits.py" "$work" >/dev/null
export OMP_NUM_THREADS=1
# 2 ranks under ddprun (the strategy starts nothing there), 4 epochs of 23 steps.
run() { timeout 240 "$build/tools/ddprun" --standalone --nproc-per-node 2 "$@"; }
digits() { echo "$build/examples/train_digits" "$work" --launcher popen --world 2 --epochs 4; }
fail() { echo "FAIL: $*"; exit 1; }
# The step log's last loss of each (epoch, batch): what the run that finished trained on.
final_losses() { awk '{v[$1" "$2]=$3} END {for (k in v) print k, v[k]}' "$1" | sort -n -k1,1 -k2,2; }
held_out() { sed -n 's/^\[rank0\]: held-out accuracy \([0-9.]*\).*/\1/p'; }
files_in() { (cd "$1" && ls | tr '\n' ' '); }

full=$(DIGITS_STEP_LOG="$work/full.log" run $(digits) --ckpt-dir "$work/full" --keep-last 2)
acc=$(echo "$full" | held_out)
[ -n "$acc" ] || fail "no held-out accuracy from the undisturbed run: $full"
[ "$(files_in "$work/full")" = "epoch=2-step=69.ckpt epoch=3-step=92.ckpt " ] ||
  fail "keep-last 2 after 4 epochs kept: $(files_in "$work/full")"

# SIGKILL rank 1 after step 57 (epoch 3); a checkpoint at each epoch's end.
killed=$(DIGITS_KILL_RANK=1 DIGITS_KILL_AT_STEP=57 DIGITS_STEP_LOG="$work/killed.log" \
  run --max-restarts 2 $(digits) --ckpt-dir "$work/killed" --keep-last 2 2>&1)
grep -q "failed first with signal 9 (SIGKILL).*restarting all workers (1 of 2)" <<<"$killed" || fail "no restart: $killed"
grep -q "^\[rank0\]: resumed from $work/killed/epoch=1-step=46.ckpt: epoch 3, step 46, 0 samples" <<<"$killed" ||
  fail "not resumed from the epoch-2 checkpoint: $killed"
[ "$(echo "$killed" | held_out)" = "$acc" ] || fail "held-out $(echo "$killed" | held_out) after the kill, $acc undisturbed"
diff <(final_losses "$work/full.log") <(final_losses "$work/killed.log") || fail "the resumed losses differ"
[ "$(wc -l <"$work/killed.log")" -eq $((92 + 57 - 46)) ] || fail "$(wc -l <"$work/killed.log") batches logged, not 92 + 11 redone"

# Every 10 steps: the restart goes on from step 50, inside epoch 3 (4 of its batches done).
steps=$(DIGITS_KILL_RANK=1 DIGITS_KILL_AT_STEP=57 DIGITS_STEP_LOG="$work/steps.log" \
  run --max-restarts 2 $(digits) --ckpt-dir "$work/steps" --keep-last 3 --every-n-steps 10 2>&1)
grep -q "^\[rank0\]: resumed from $work/steps/epoch=2-step=50.ckpt: epoch 3, step 50, 256 samples of the epoch done (by 2 ranks; now 2)" <<<"$steps" ||
  fail "not resumed from step 50: $steps"
[ "$(echo "$steps" | held_out)" = "$acc" ] || fail "held-out after a mid-epoch resume: $steps"
diff <(final_losses "$work/full.log") <(final_losses "$work/steps.log") || fail "the losses after a mid-epoch resume differ"
[ "$(files_in "$work/steps")" = "epoch=3-step=80.ckpt epoch=3-step=90.ckpt epoch=3-step=92.ckpt " ] ||
  fail "keep-last 3 kept: $(files_in "$work/steps")"

# A damaged newest file is passed over, naming why; a stray temporary of a dead writer is never read, and pruned.
mkdir "$work/damaged"
cp "$work/steps/epoch=3-step=80.ckpt" "$work/damaged/"
head -c 300 "$work/steps/epoch=3-step=90.ckpt" >"$work/damaged/epoch=3-step=90.ckpt"
dead=$(sh -c 'echo $$')
cp "$work/steps/epoch=3-step=92.ckpt" "$work/damaged/epoch=3-step=91.ckpt.tmp.$dead"
cp "$work/steps/epoch=3-step=92.ckpt" "$work/damaged/epoch=3-step=89.ckpt.tmp.$dead.3"
damaged=$(run $(digits) --ckpt-dir "$work/damaged" --keep-last 5 2>&1)
grep -q "^\[rank0\]: passed over $work/damaged/epoch=3-step=90.ckpt: .*" <<<"$damaged" || fail "the damaged file is not named: $damaged"
grep -q "^\[rank0\]: resumed from $work/damaged/epoch=3-step=80.ckpt" <<<"$damaged" || fail "not resumed from step 80: $damaged"
[ "$(echo "$damaged" | held_out)" = "$acc" ] || fail "held-out after passing over a damaged file: $damaged"
[ ! -e "$work/damaged/epoch=3-step=91.ckpt.tmp.$dead" ] || fail "the dead writer's temporary was not pruned"
[ ! -e "$work/damaged/epoch=3-step=89.ckpt.tmp.$dead.3" ] || fail "the dead writer's numbered temporary was not pruned"

# The ranks agree: a file rank 1 cannot see is passed over for the newest both have.
mkdir "$work/view0" "$work/view1"
cp "$work/steps/epoch=3-step=80.ckpt" "$work/steps/epoch=3-step=90.ckpt" "$work/view0/"
cp "$work/steps/epoch=3-step=80.ckpt" "$work/view1/"
cat >"$work/by_rank.sh" <<SH
#!/bin/sh
exec $(digits) --ckpt-dir "$work/view\$RANK" "\$@"
SH
chmod +x "$work/by_rank.sh"
views=$(run "$work/by_rank.sh" 2>&1)
grep -q "^\[rank0\]: passed over $work/view0/epoch=3-step=90.ckpt: rank 1 does not have it" <<<"$views" ||
  fail "the file rank 1 lacks is not named: $views"
grep -q "^\[rank0\]: resumed from $work/view0/epoch=3-step=80.ckpt" <<<"$views" || fail "not resumed from step 80: $views"
[ "$(echo "$views" | held_out)" = "$acc" ] || fail "held-out after the agreement: $views"
# No file that every rank has: every rank stops with DDP_E_IO naming the files, before training.
rm -f "$work/view1/"* "$work/view0/"epoch=3-step=9*
set +e
none=$(run "$work/by_rank.sh" 2>&1)
rc=$?
set -e
[ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "exit $rc when no checkpoint loads on every rank: $none"
for r in 0 1; do
  grep -q "^\[rank$r\]: .*ddp_strategy_resume_from_dir.*i/o error: resume_from_dir: none of the 1 checkpoints in $work/view$r\? .*epoch=3-step=80.ckpt: rank 1 does not have it" <<<"$none" ||
    { echo "$none" | grep "rank$r"; fail "rank $r did not name the missing file"; }
done
! grep -q "epoch  4" <<<"$none" || fail "trained without a common checkpoint: $none"

# Another world size: 1 rank goes on from the 2-rank checkpoint at step 50; the 1181 samples left in
# epoch 3 are 37 batches of 32 (steps 51..87), then epoch 4's 45 (to step 132).
DIGITS_KILL_RANK=1 DIGITS_KILL_AT_STEP=51 run $(digits) --ckpt-dir "$work/one" --every-n-steps 25 >/dev/null 2>&1 || true
one=$(timeout 240 "$build/examples/train_digits" "$work" --launcher popen --world 1 --epochs 4 --ckpt-dir "$work/one" 2>&1)
grep -q "^resumed from $work/one/epoch=2-step=50.ckpt: epoch 3, step 50, 256 samples of the epoch done (by 2 ranks; now 1)" <<<"$one" ||
  fail "1 rank did not resume the 2-rank checkpoint: $one"
[ -e "$work/one/epoch=2-step=87.ckpt" ] && [ -e "$work/one/epoch=3-step=132.ckpt" ] ||
  fail "1 rank's epochs 3 and 4 took other step counts: $(files_in "$work/one")"
grep -q "^held-out accuracy" <<<"$one" || fail "no result from 1 rank: $one"

echo "digits resume: held-out $acc undisturbed and after SIGKILL (epoch-end and mid-epoch checkpoints, losses equal), keep-last, damaged newest and unseen newest passed over, none common refused on both ranks, 2 -> 1 ranks re-sharded"
