#!/usr/bin/env bash
# The reliability table (issue 27), from one command: runs the fault
# injection, flight recorder, soak, fuzzing and ThreadSanitizer checks and
# prints a Markdown table of what was done and what was observed, with the
# bound each was checked against.
#   scripts/reliability.sh [FUZZ_SECONDS_PER_TARGET (default 30)]
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
fuzz_s=${1:-30}
"$here/scripts/build.sh" >/dev/null
build="$here/build"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export OMP_NUM_THREADS=1

# One ctest selection -> "passed/total" and its log.
run_ctest() {  # run_ctest <name> <regex> [ctest args]
  ctest --test-dir "$build" -R "$2" --timeout 600 "${@:3}" >"$logs/$1.log" 2>&1
  local line
  line=$(grep -E "tests passed" "$logs/$1.log" | tail -1)
  local pct total failed
  total=$(echo "$line" | sed -E 's/.* out of ([0-9]+).*/\1/')
  failed=$(echo "$line" | sed -E 's/.* ([0-9]+) tests failed.*/\1/')
  echo "$((total - failed))/$total passed"
}

row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4"; }

echo "| Area | What was done | Bound checked | Observed |"
echo "|---|---|---|---|"
row "Killed and stopped ranks, killed store host" \
  "real ranks over Gloo and shm: SIGKILL, SIGSTOP, store host killed or stopped, also at random moments of shared-bucket work (Collectives, Failures, Shm, ShmFaults, Hardening tests)" \
  "every rank returns a status within its timeout; nothing left in /dev/shm" \
  "$(run_ctest faults 'Collectives\.|Failures|ShmWorlds|ShmFaults|Hardening\.')"
row "Link cuts, lost nodes" \
  "ddprun nodes in network namespaces, links cut, agents killed (Ddprun, elastic tests)" \
  "the job ends with the lost node named within the heartbeat window" \
  "$(run_ctest launch '^Ddprun\.|ddprun_elastic')"
row "Mismatched collectives, stalled ranks" \
  "different sizes, different ops, a stalled rank, SIGABRT, on Gloo and shm; the flight recorder's verdict read back" \
  "the verdict names the rank behind, the collective and what differed" \
  "$(run_ctest flight 'Flight')"
soak=$(run_ctest soak 'Soak\.' -V)
# The worst growth over every soak (the reducer under each hook, and the
# strategy lifecycles).
worst=$(grep -hoE "growth from (step 100|cycle 10): fds [-+][0-9]+, threads [-+][0-9]+, RSS [-+][0-9]+ KiB" \
  "$logs/soak.log" | sed -E 's/.*fds ([-+][0-9]+), threads ([-+][0-9]+), RSS ([-+][0-9]+) KiB/\1 \2 \3/' |
  awk 'NR == 1 {f = $1; t = $2; r = $3} {if ($1 > f) f = $1; if ($2 > t) t = $2; if ($3 > r) r = $3}
       END {printf "fds %+d, threads %+d, RSS %+d KiB", f, t, r}')
row "Soaks of the training path" \
  "1,000 reducer steps x 8 comm hooks on 4 ranks (random buckets, unused parameters, no_sync windows); 100 strategy lifecycles (new, setup on the same port, 5 steps, teardown) in one process on 2 ranks" \
  "every step equals the all-reduce average (PowerSGD: the ranks agree); no fd or thread growth; RSS growth under 32 MiB (reducer) and 64 MiB (lifecycles)" \
  "$soak; worst growth: $worst"
fuzz_out=$(bash "$here/scripts/fuzz.sh" "$fuzz_s" 2>&1)
fuzz_rc=$?
execs=$(echo "$fuzz_out" | awk 'NR > 1 && $2 ~ /^[0-9]+$/ {s += $2} END {print s + 0}')
findings=$(echo "$fuzz_out" | awk 'NR > 1 && $7 ~ /^[0-9]+$/ {s += $7} END {print s + 0}')
row "Fuzzing (libFuzzer, ASan+UBSan)" \
  "5 targets: cluster environments, ddprun's arguments, the store's wire protocol, flight records, checkpoint zip directories; ${fuzz_s} s each" \
  "no crash, leak, UB or 10 s hang" \
  "$([ $fuzz_rc -eq 77 ] && echo "skipped (no clang)" || echo "$execs executions, $findings findings")"
tsan=$(bash "$here/scripts/test_tsan.sh" 2>&1 | tail -1)
row "ThreadSanitizer" \
  "the flight recorder's ring (4 writers, a dumping thread), the store server with 4 clients" \
  "no report (no suppressions)" \
  "$tsan"
echo
echo "Fuzzing, per target:"
echo '```'
echo "$fuzz_out"
echo '```'
