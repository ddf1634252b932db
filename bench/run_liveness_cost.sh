#!/usr/bin/env bash
# Issue 25: what the liveness machinery costs while nothing fails. Two
# ddprun nodes on loopback (1 worker each, `sleep`), heartbeats every
# --monitor-interval (0.1 s, the default) through the store: the CPU time
# each agent used over SECONDS of wall time, as a share of one core. The
# other part, each group's store watcher (a look at its own and the job's
# abort key every 100 ms), is measured with the rest of an idle group: the
# CPU time of a worker that joined a 2-rank group and waits (mp_worker's
# joined_idle), over the same wall time.
source "$(dirname "$0")/common.sh"
seconds=${SECONDS_RUN:-10}
p=$(port)
ticks=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$ticks" '{print ($14 + $15) * 1000 / t}' "/proc/$1/stat"; }
share() { echo "scale=3; $1 / ($seconds * 10)" | bc; }  # ms over the window -> % of one core
common="--nnodes 2 --master-port $p --nproc-per-node 1 --run-id cost$$"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
export DDP_TEST_IDLE_S=$((seconds + 3))
"$build/tools/ddprun" $common --node-rank 0 "$build/tests/mp_worker" joined_idle >"$out" 2>&1 & a=$!
"$build/tools/ddprun" $common --node-rank 1 "$build/tests/mp_worker" joined_idle >/dev/null 2>&1 & b=$!
until [ "$(grep -c joined "$out")" -ge 1 ]; do sleep 0.1; done
sleep 1
w=$(pgrep -P $a -f mp_worker | head -1)
a0=$(cpu_ms $a) b0=$(cpu_ms $b) w0=$(cpu_ms $w)
sleep "$seconds"
a1=$(cpu_ms $a) b1=$(cpu_ms $b) w1=$(cpu_ms $w)
wait $a $b
da=$(echo "$a1 - $a0" | bc) db=$(echo "$b1 - $b0" | bc) dw=$(echo "$w1 - $w0" | bc)
echo "CPU over ${seconds} s while nothing fails (2 nodes on loopback, heartbeats every 0.1 s):"
echo "  agent of node 0 (store host): $da ms ($(share "$da")% of one core)"
echo "  agent of node 1:              $db ms ($(share "$db")% of one core)"
echo "  an idle rank (its group's watcher and waits): $dw ms ($(share "$dw")% of one core)"
