#!/usr/bin/env bash
# Elastic membership across two "nodes" (issue 25): two network namespaces
# joined by a veth pair, one ddprun in each, `--nnodes 1:2`, the digits job
# resuming from its checkpoint directory. Node 1's link is cut mid-training:
# node 0's rank returns DDP_E_PEER_FAILED naming node 1 within the heartbeat
# window, node 0 restarts alone (world size 1) from the last checkpoint, and
# node 1's ddprun ends by itself (its store is unreachable). The link comes
# back and node 1 starts again: it waits, node 0's round stops to admit it,
# and both finish the job together (world size 2), resumed from the
# checkpoint the world of 1 wrote. Then `--nnodes 2:2` with a node that never
# comes back: node 0 ends non-zero within the rendezvous timeout. Nothing is
# left running.
#   test_elastic_nodes.sh <build dir> <source dir> <python>
set -euo pipefail
build=$1 src=$2 py=$3
[ "$(id -u)" = 0 ] || { echo "skipped: network namespaces need root"; exit 77; }
command -v ip >/dev/null || { echo "skipped: no iproute2 (ip)"; exit 77; }
"$py" -c "import sklearn" 2>/dev/null || { echo "skipped: scikit-learn is not in $py's environment"; exit 77; }
work=$(mktemp -d)
ns0=ddpel0_$$ ns1=ddpel1_$$ v0=ddpe0$$ v1=ddpe1$$
cleanup() {
  pkill -KILL -f "$work/" 2>/dev/null || true
  ip netns del $ns0 2>/dev/null || true
  ip netns del $ns1 2>/dev/null || true
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
ip netns add $ns0 || { echo "skipped: cannot create network namespaces here"; exit 77; }
ip netns add $ns1
ip link add $v0 type veth peer name $v1 || { echo "skipped: cannot create a veth pair here"; exit 77; }
ip link set $v0 netns $ns0 && ip link set $v1 netns $ns1
ip -n $ns0 addr add 10.78.0.1/24 dev $v0 && ip -n $ns1 addr add 10.78.0.2/24 dev $v1
for pair in "$ns0 $v0" "$ns1 $v1"; do
  set -- $pair
  ip -n "$1" link set lo up && ip -n "$1" link set "$2" up
done
"$py" "$src/examples/digits/export_digits.py" "$work" >/dev/null
cp "$build/examples/train_digits" "$build/tools/ddprun" "$work/"  # "$work/" in every command line: pkill finds them
export OMP_NUM_THREADS=1 DIGITS_STEP_SLEEP_MS=20
# Node 1's ddprun is killed below and cannot remove its flight recorder directory: it goes under $work.
export TMPDIR="$work"
# Milliseconds since boot: the wall clock (date) can jump on a VM; /proc/uptime does not.
mono_ms() { local u r; read -r u r </proc/uptime; u=${u%.*}${u#*.}; echo $((10#$u * 10)); }
fail() { echo "FAIL: $*"; for f in "$work"/*.out; do echo "== $f"; cat "$f"; done; exit 1; }
wait_for() {  # wait_for FILE PATTERN SECONDS
  local i=0
  until grep -q "$2" "$1" 2>/dev/null; do
    i=$((i + 1)); [ $i -le $(($3 * 10)) ] || fail "no '$2' in $1 within $3 s"
    sleep 0.1
  done
}
node() {  # node NS RANK NNODES EXTRA...: one node's ddprun, in the background
  local ns=$1 rank=$2 nnodes=$3; shift 3
  ip netns exec $ns "$work/ddprun" --nnodes $nnodes --node-rank $rank --master-addr 10.78.0.1 --master-port 29577 \
    --nproc-per-node 1 --agent-timeout 3 --grace-period 1 --rdzv-conf last_call_timeout=2 --run-id elastic$$ "$@" \
    "$work/train_digits" "$work" --launcher popen --devices-auto --epochs 8 --ckpt-dir "$work/ckpts" --every-n-steps 10
}

node $ns0 0 1:2 --max-restarts 3 >"$work/node0.out" 2>&1 & n0=$!
# Node ranks follow the order of arrival: node 1's agent starts once the
# store host's listens, so that the store host's node is node 0 (under ASan
# a slow start of node 0's agent once let node 1 arrive first).
for _ in $(seq 600); do
  ip netns exec $ns0 ss -ltnH "sport = :29577" 2>/dev/null | grep -q . && break
  sleep 0.1
done
ip netns exec $ns0 ss -ltnH "sport = :29577" | grep -q . || fail "node 0's store did not listen within 60 s"
sleep 0.5
node $ns1 1 1:2 >"$work/node1.out" 2>&1 & n1=$!
wait_for "$work/node0.out" "round 0: node . of 2 (world size 2)" 60
wait_for "$work/node0.out" "epoch  2" 120
ip -n $ns1 link set $v1 down  # node 1 cut off: nothing closes its sockets
cut=$(mono_ms)
wait_for "$work/node0.out" "^\[rank0\]: .*node 1 is lost" 30
detected=$(($(mono_ms) - cut))
# The heartbeat window (3 s) plus 1 s, as the issue asks (the look here polls every 0.1 s).
[ $detected -le 4000 ] || fail "node 0's rank heard of node 1 $detected ms after the cut"
wait_for "$work/node0.out" "node 0 of 1 (world size 1)" 30
wait $n1 && fail "node 1's ddprun ended 0 without its store"
grep -q "all_reduce.*peer failed\|peer failed.*node 1 is lost" "$work/node0.out" ||
  grep -q "node 1 is lost: its agent's heartbeat stopped for 3 s" "$work/node0.out" || fail "node 0's rank did not name node 1"
grep -q "^\[rank0\]: .*node 1 is lost: its agent's heartbeat stopped for 3 s" "$work/node0.out" ||
  fail "node 0's rank did not get the lost node as its status"
wait_for "$work/node0.out" "resumed from .*(by 2 ranks; now 1)" 30
alone=$(($(mono_ms) - cut))
# Node 1 comes back once the world of 1 has written a checkpoint of its own
# (every 10 steps), which the world of 2 must resume from: admitted sooner
# (a loaded host once let it in within a second), the world of 2 resumed
# the world of 2's. Temporaries (".tmp.") are not checkpoints yet.
checkpoints() { ls "$work/ckpts" | grep '\.ckpt$' || true; }
before=$(checkpoints)
for _ in $(seq 300); do [ "$(checkpoints)" != "$before" ] && break; sleep 0.1; done
[ "$(checkpoints)" != "$before" ] || fail "the world of 1 wrote no checkpoint within 30 s"
ip -n $ns1 link set $v1 up
node $ns1 1 1:2 >"$work/node1b.out" 2>&1 & n1=$!
wait_for "$work/node1b.out" "had closed; this node waits to join the next" 60
wait_for "$work/node0.out" "stopped to admit the node(s) waiting to join" 60
wait $n0 || fail "node 0 ended with $?"
wait $n1 || fail "node 1 ended with $?"
grep -q "resumed from .*(by 1 ranks; now 2)" "$work/node0.out" "$work/node1b.out" || fail "the world of 2 did not resume the world of 1's checkpoint"
grep -q "held-out accuracy .*, 2 processes" "$work/node0.out" "$work/node1b.out" || fail "no result from the world of 2"

# --nnodes 2:2 and node 1 never comes back: node 0 ends non-zero, naming the rendezvous, within its timeout.
rm -rf "$work/ckpts"
node $ns0 0 2:2 --max-restarts 1 --rdzv-timeout 10 >"$work/fixed0.out" 2>&1 & n0=$!
node $ns1 1 2:2 >"$work/fixed1.out" 2>&1 & n1=$!
wait_for "$work/fixed0.out" "epoch  1" 120
ip netns pids $ns1 | xargs -r kill -KILL  # node 1's ddprun and its worker, all at once
t0=$(mono_ms)
set +e
wait $n0
rc=$?
set -e
took=$((($(mono_ms) - t0) / 1000))
wait $n1 || true
[ $rc -ne 0 ] || fail "node 0 ended 0 without node 1"
grep -q "rendezvous at 10.78.0.1:29577 timed out.*1 of 2" "$work/fixed0.out" || fail "node 0 did not name the rendezvous it waited for"
[ $took -lt 40 ] || fail "node 0 took $took s to give up (3 s heartbeat + 10 s rendezvous)"
sleep 0.5
! pgrep -f "$work/" >/dev/null || fail "left running: $(pgrep -af "$work/")"
echo "elastic: node 1 cut off, node 0's rank told in $detected ms, node 0 alone from the checkpoint $alone ms later, node 1 back and admitted, the job finished on 2; 2:2 without node 1 ended in $took s"
