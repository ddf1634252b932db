#!/usr/bin/env bash
# Python: libddp's binding (torch tensors through DLPack, no copy) against
# torch.distributed (gloo), a 2-rank all-reduce at 4 B to 16 MiB, each in
# its own run of the same program under ddprun, rounds alternating. Reports
# each one's median and the ratio libddp / torch.   bash bench/run_python_allreduce.sh [rounds]
source "$(dirname "$0")/common.sh"
rounds=${1:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "$rounds"); do
  for impl in libddp torch; do
    PYTHONPATH="$build/bindings/python" "$build/tools/ddprun" --standalone --nproc-per-node 2 \
      "$py" "$here/bench/bench_python_allreduce.py" "$impl" 2>"$work/err" | sed 's/^\[rank0\]: //' | grep '^{' ||
      { echo "a $impl run failed (left out):" >&2; tail -3 "$work/err" >&2; }
  done
done > "$work/lines"
"$py" - "$work/lines" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for r in rows:
    med.setdefault((r["impl"], r["bytes"]), []).append(r["us"])
sizes = sorted({b for _, b in med})
print(f"2 ranks, all-reduce of a torch float32 tensor from Python, medians of {sys.argv[2]} alternating rounds")
print(f"{'bytes':>10} {'libddp us':>11} {'torch us':>11} {'libddp/torch':>13}")
for b in sizes:
    if ("libddp", b) not in med or ("torch", b) not in med:
        continue
    l, t = statistics.median(med[("libddp", b)]), statistics.median(med[("torch", b)])
    print(f"{b:>10} {l:11.1f} {t:11.1f} {l / t:13.3f}")
PY
