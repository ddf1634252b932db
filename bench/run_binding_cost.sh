#!/usr/bin/env bash
# Per-call cost through each binding against the C API, one run: a 4-byte
# all-reduce and a reducer step (4 gradients of 256 floats marked ready,
# then finish) on 2 ranks under ddprun, the same calls from C
# (bench_binding_cost.c), Python (bench_binding_cost.py), Java
# (BenchBindingCost.java) and Rust (examples/bench_binding_cost.rs). Rounds
# alternate the languages; the report gives each one's median over the
# rounds and its cost over C's.   bash bench/run_binding_cost.sh [rounds]
source "$(dirname "$0")/common.sh"
rounds=${1:-5}
cmake --build "$build" -j2 --target bench_binding_cost >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
javac -nowarn -d "$work" -cp "$build/bindings/java/libddp.jar" "$here/bench/BenchBindingCost.java"
PKG_CONFIG_PATH="$build" CARGO_TARGET_DIR="$build/rust-target" cargo build --offline --quiet --release \
  --example bench_binding_cost --manifest-path "$here/bindings/rust/Cargo.toml"
run() {
  "$build/tools/ddprun" --standalone --nproc-per-node 2 "$@" 2>"$work/err" | sed 's/^\[rank0\]: //' | grep '^{' ||
    { echo "a run of $1 failed (left out):" >&2; tail -3 "$work/err" >&2; }
}
for _ in $(seq "$rounds"); do
  run "$build/bench/bench_binding_cost"
  PYTHONPATH="$build/bindings/python" run "$py" "$here/bench/bench_binding_cost.py"
  run java -cp "$build/bindings/java/libddp.jar:$work" BenchBindingCost
  run "$build/rust-target/release/examples/bench_binding_cost"
done > "$work/lines"
"$py" - "$work/lines" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["lang"], []).append(r)
med = {lang: {k: statistics.median(r[k] for r in rs) for k in ("allreduce_us", "reducer_step_us")} for lang, rs in by.items()}
c = med["c"]
print(f"2 ranks, shm backend, medians of {sys.argv[2]} alternating rounds (each a median of 7 blocks of 2000 calls)")
print(f"{'':8} {'4-byte all-reduce':>20} {'over C':>8} {'reducer step':>14} {'over C':>8}")
for lang in ("c", "python", "java", "rust"):
    m = med.get(lang)
    if m:
        print(f"{lang:8} {m['allreduce_us']:17.2f} us {m['allreduce_us'] - c['allreduce_us']:+7.2f} "
              f"{m['reducer_step_us']:11.2f} us {m['reducer_step_us'] - c['reducer_step_us']:+7.2f}")
PY
