#!/usr/bin/env bash
# Step time and bytes on the wire for every comm hook at 2 ranks, in one run:
# first over loopback, then between two network namespaces ("hosts") joined
# by a veth pair shaped to 1 Gbit/s with tc (needs root and iproute2).
# The model is communication-bound: LAYERS x (DIM x DIM weight + bias)
# float32 gradients (default 8 x 1024^2: 32 MiB per step), no compute.
# The peer is PyTorch's DDP with PyTorch's own hooks on the same gradients.
# Reports, per hook and implementation, p50 step time, the speed-up over
# plain all-reduce, the bytes rank 0 sent per step (on lo both ranks' bytes
# are counted, so the figure there is halved), and libddp / PyTorch.
source "$(dirname "$0")/common.sh"
steps=${STEPS:-10} dim=${DIM:-1024} layers=${LAYERS:-8}
out=$(mktemp)
ns0=ddpbench0 ns1=ddpbench1

run_pair() {  # <label> <iface rank0> <iface rank1> <master addr> <prefix rank0> <prefix rank1>
  local label=$1 if0=$2 if1=$3 addr=$4 pre0=$5 pre1=$6 p prog
  for prog in "$build/bench/bench_hooks" "$py $here/bench/bench_hooks_torch.py"; do
    p=$(port)
    local common="MASTER_ADDR=$addr MASTER_PORT=$p WORLD_SIZE=2 LOCAL_WORLD_SIZE=1 OMP_NUM_THREADS=1"
    # GLOO_SOCKET_IFNAME: torch.distributed otherwise picks the interface of
    # the host name, which no namespace here routes.
    $pre0 timeout 600 env $common RANK=0 GLOO_SOCKET_IFNAME="$if0" $prog "$if0" "$steps" "$dim" "$layers" 2>/dev/null \
      | sed "s/^{/{\"link\": \"$label\", /" >>"$out" &
    local a=$!
    $pre1 timeout 600 env $common RANK=1 GLOO_SOCKET_IFNAME="$if1" $prog "$if1" "$steps" "$dim" "$layers" >/dev/null 2>&1 &
    local b=$!
    # A peer that fails (see bench_hooks_torch.py) loses only its own rows;
    # what it printed before stays in the report.
    wait $a || echo "($prog on $label exited with an error)" >&2
    wait $b || true
  done
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
    print(f"{link}: {rs[0]['params']} float32 gradients, {rs[0]['steps']} steps per hook")
    print(f"  {'hook':20} {'impl':11} {'p50 ms':>8} {'min ms':>8} {'vs allreduce':>12} {'MB sent/step':>12} "
          f"{'compression':>11} {'libddp/torch':>12}")
    for impl in ("libddp", "pytorch-ddp"):
        mine = [r for r in rs if r["impl"] == impl]
        if not mine:
            continue
        base = next(r for r in mine if r["hook"] == "allreduce")["step_ms_p50"]
        for r in mine:
            tx = r["tx_bytes_per_step"] / (2 if r["iface"] == "lo" else 1) / 1e6
            rate = f"{r['compression_rate']:.1f}x" if r["compression_rate"] else ""
            peer = next((p for p in rs if p["impl"] != impl and p["hook"] == r["hook"]), None)
            ratio = f"{r['step_ms_p50'] / peer['step_ms_p50']:.2f}" if impl == "libddp" and peer else ""
            print(f"  {r['hook']:20} {impl:11} {r['step_ms_p50']:8.2f} {r['step_ms_min']:8.2f} "
                  f"{base / r['step_ms_p50']:11.2f}x {tx:12.3f} {rate:>11} {ratio:>12}")
PY
rm -f "$out"
