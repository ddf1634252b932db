#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/targets/) for a bounded time and reports
# executions, coverage and findings:
#   scripts/fuzz.sh [SECONDS_PER_TARGET (default 60)] [TARGET...]
# Targets: cluster_env ddprun_args store_wire flight_record checkpoint_zip
# pickle_filter torch_archive.
# Each starts from the seeds in fuzz/corpus/<target> plus what earlier runs
# found (build-fuzz/corpus/<target>, not committed; DDP_FUZZ_BUILD_DIR moves
# build-fuzz/); a crash, leak, UB or timeout is written to
# build-fuzz/findings/ and makes the script fail.
# Needs clang and libFuzzer (Debian: clang, libclang-rt-14-dev); exits 77,
# saying so, without them.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(cluster_env ddprun_args store_wire flight_record checkpoint_zip pickle_filter torch_archive)
out="${DDP_FUZZ_BUILD_DIR:-$here/build-fuzz}"

if ! command -v clang++ >/dev/null; then
  echo "skipped: clang++ is not installed (Debian: clang)"
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cpp"
if ! clang++ -fsanitize=fuzzer "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
  echo "skipped: clang++ cannot link libFuzzer (Debian: libclang-rt-14-dev)"
  exit 77
fi
torch_include=$(ls -d "$here"/.venv/lib/python3*/site-packages/torch/include 2>/dev/null | head -1 || true)
cmake -S "$here/fuzz" -B "$out" -DCMAKE_CXX_COMPILER=clang++ -DDDP_TORCH_INCLUDE="$torch_include" >/dev/null
cmake --build "$out" -j2 >/dev/null

mkdir -p "$out/findings"
failed=0
printf '%-16s %12s %10s %8s %8s %10s  %s\n' target executions exec/s cov features corpus findings
for t in "${targets[@]}"; do
  bin="$out/fuzz_$t"
  if [ ! -x "$bin" ]; then
    printf '%-16s not built (checkpoint_zip and torch_archive need the venv torch: scripts/bootstrap.sh)\n' "$t"
    failed=1
    continue
  fi
  mkdir -p "$out/corpus/$t"
  log="$out/fuzz_$t.log"
  before=$(ls "$out/findings" | grep -c "^$t-" || true)
  # -timeout: one input taking over 10 s is a finding (a hang); -rss_limit_mb
  # bounds what one input may make the parser allocate.
  set +e
  (cd "$out" && "$bin" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
     -artifact_prefix="$out/findings/$t-" "$out/corpus/$t" "$here/fuzz/corpus/$t") >"$log" 2>&1
  rc=$?
  set -e
  after=$(ls "$out/findings" | grep -c "^$t-" || true)
  execs=$(awk '/stat::number_of_executed_units/ {print $NF}' "$log" | tail -1)
  rate=$(awk '/stat::average_exec_per_sec/ {print $NF}' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+ corp: [0-9]+' "$log" | tail -1 || true)
  set -- $cov
  printf '%-16s %12s %10s %8s %8s %10s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${2:-?}" "${4:-?}" "${6:-?}" \
    "$((after - before))"
  if [ "$rc" -ne 0 ] || [ "$after" -ne "$before" ]; then
    failed=1
    echo "  $t failed (exit $rc); see $log and $out/findings/" >&2
    # The whole end of the log: a harness's own abort (a server that stopped
    # answering) says why only in its last lines, and the log is overwritten
    # by the next run.
    grep -v '^#[0-9]' "$log" | tail -n 25 >&2 || true
  fi
done
exit $failed
