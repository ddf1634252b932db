#!/usr/bin/env bash
# Step time and bytes on the wire for every comm hook at 2 ranks, in one run:
# first over loopback, then between two network namespaces ("hosts") joined
# by a veth pair shaped to 1 Gbit/s with tc (needs root and iproute2).
# The model is communication-bound: LAYERS x (DIM x DIM weight + bias)
# float32 gradients (default 8 x 1024^2: 32 MiB per step), no compute.
# Reports, per hook, p50 step time, its speed-up over plain all-reduce, and
# the bytes rank 0 sent per step (on lo both ranks' bytes are counted, so
# the figure there is halved).
source "$(dirname "$0")/common.sh"
steps=${STEPS:-10} dim=${DIM:-1024} layers=${LAYERS:-8}
out=$(mktemp)
ns0=ddpbench0 ns1=ddpbench1

run_pair() {  # <label> <iface rank0> <iface rank1> <master addr> <prefix rank0> <prefix rank1>
  local label=$1 if0=$2 if1=$3 addr=$4 pre0=$5 pre1=$6 p
  p=$(port)
  local common="MASTER_ADDR=$addr MASTER_PORT=$p WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 OMP_NUM_THREADS=1"
  $pre0 env $common RANK=0 "$build/bench/bench_hooks" "$if0" "$steps" "$dim" "$layers" \
    | sed "s/^{/{\"link\": \"$label\", /" >>"$out" &
  local a=$!
  $pre1 env $common RANK=1 "$build/bench/bench_hooks" "$if1" "$steps" "$dim" "$layers" >/dev/null &
  local b=$!
  wait $a && wait $b
}

cleanup() { ip netns del $ns0 2>/dev/null || true; ip netns del $ns1 2>/dev/null || true; }

run_pair loopback lo lo 127.0.0.1 "" ""

if [ "$(id -u)" = 0 ] && command -v tc >/dev/null; then
  cleanup
  trap cleanup EXIT
  ip netns add $ns0 && ip netns add $ns1
  ip link add ddpv0 type veth peer name ddpv1
  ip link set ddpv0 netns $ns0 && ip link set ddpv1 netns $ns1
  ip -n $ns0 addr add 10.77.0.1/24 dev ddpv0 && ip -n $ns1 addr add 10.77.0.2/24 dev ddpv1
  for pair in "$ns0 ddpv0" "$ns1 ddpv1"; do
    set -- $pair
    ip -n "$1" link set lo up && ip -n "$1" link set "$2" up
    # 1 Gbit/s each way; the bucket holds a few ms of traffic at that rate.
    tc -n "$1" qdisc add dev "$2" root tbf rate 1gbit burst 512kb latency 50ms
  done
  run_pair veth-1gbit ddpv0 ddpv1 10.77.0.1 "ip netns exec $ns0" "ip netns exec $ns1"
else
  echo "(not root or no tc: the shaped two-namespace run is skipped)" >&2
fi

"$py" - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
for link in dict.fromkeys(r["link"] for r in rows):
    rs = [r for r in rows if r["link"] == link]
    base = next(r for r in rs if r["hook"] == "allreduce")["step_ms_p50"]
    print(f"{link}: {rs[0]['params']} float32 gradients, {rs[0]['steps']} steps per hook")
    print(f"  {'hook':22} {'p50 ms':>9} {'min ms':>9} {'vs allreduce':>12} {'MB sent/step':>12} {'compression':>11}")
    for r in rs:
        tx = r["tx_bytes_per_step"] / (2 if r["iface"] == "lo" else 1) / 1e6
        rate = f"{r['compression_rate']:.1f}x" if r["compression_rate"] else ""
        print(f"  {r['hook']:22} {r['step_ms_p50']:9.2f} {r['step_ms_min']:9.2f} {base / r['step_ms_p50']:11.2f}x "
              f"{tx:12.3f} {rate:>11}")
PY
rm -f "$out"
