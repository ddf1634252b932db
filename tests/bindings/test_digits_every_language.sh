#!/usr/bin/env bash
# The proof that every binding trains: the digits job written in Python,
# Java and Rust (examples/python/train_digits.py, examples/java/
# TrainDigits.java, bindings/rust/ddp/examples/train_digits.rs), each run on
# 2 ranks under ddprun, gives at every one of its 460 steps the loss the C
# job gives (examples/c/train_digits.c, same launcher), as the same float32,
# and the C job's held-out accuracy. A language whose toolchain or binding is
# missing here is named as skipped; the test fails if all are.
#   test_digits_every_language.sh <build dir> <source dir> <python>
set -euo pipefail
build=$1 src=$2 py=$3
"$py" -c "import sklearn, numpy" 2>/dev/null || { echo "skipped: scikit-learn is not in $py's environment (scripts/bootstrap.sh installs it)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/examples/digits/export_digits.py" "$work/data" >/dev/null
export OMP_NUM_THREADS=1
ddprun=("$build/tools/ddprun" --standalone --nproc-per-node 2)

# Runs one language's job: run <name> <command...>; its step log is $work/<name>.log.
run() {
  local name=$1
  shift
  DIGITS_STEP_LOG="$work/$name.log" "${ddprun[@]}" "$@" > "$work/$name.out" 2>&1 ||
    { cat "$work/$name.out"; echo "FAIL: the $name job failed"; exit 1; }
  sed -n 's/^\(\[rank0\]: \)\{0,1\}\(held-out accuracy [0-9.]* ([0-9]* of [0-9]*)\).*/\2/p' "$work/$name.out"
}
c_result=$(run c "$build/examples/train_digits" "$work/data" --launcher popen --world 2)
[ -n "$c_result" ] || { echo "FAIL: the C job printed no held-out accuracy"; exit 1; }
echo "C: $c_result"

# Each language's losses equal the C job's as float32, step by step.
same_as_c() {
  local name=$1 result=$2
  [ "$result" = "$c_result" ] || { echo "FAIL: $name: '$result', the C job: '$c_result'"; exit 1; }
  "$py" - "$work/c.log" "$work/$name.log" "$name" <<'PY'
import sys
import numpy as np
c, other = (np.loadtxt(p, dtype=np.float32, ndmin=1) for p in sys.argv[1:3])
name = sys.argv[3]
if len(c) != 460 or len(other) != len(c):
    sys.exit(f"FAIL: {name}: {len(other)} step losses, the C job {len(c)} (460 expected)")
differ = np.flatnonzero(c != other)
if len(differ):
    i = differ[0]
    sys.exit(f"FAIL: {name}: {len(differ)} of 460 step losses differ from C's; step {i}: {other[i]!r} vs {c[i]!r}")
print(f"{name}: 460 step losses equal to C's, {c[-1]:.6f} at the last")
PY
  ran=$((ran + 1))
}
ran=0

if [ -f "$build/bindings/python/libddp/__init__.py" ]; then
  same_as_c python "$(PYTHONPATH="$build/bindings/python" run python "$py" "$src/examples/python/train_digits.py" "$work/data")"
else
  echo "skipped python: the SWIG Python binding is not built"
fi

if [ -f "$build/bindings/java/libddp.jar" ] && command -v java >/dev/null; then
  # Plain `java -cp libddp.jar`: the jar loads its own JNI library.
  same_as_c java "$(run java java -cp "$build/bindings/java/libddp.jar" "$src/examples/java/TrainDigits.java" "$work/data")"
else
  echo "skipped java: the SWIG Java binding or a JDK is missing"
fi

if command -v cargo >/dev/null; then
  PKG_CONFIG_PATH="$build" CARGO_TARGET_DIR="$build/rust-target" cargo build --offline --quiet --release \
    --example train_digits --manifest-path "$src/bindings/rust/Cargo.toml"
  same_as_c rust "$(run rust "$build/rust-target/release/examples/train_digits" "$work/data")"
else
  echo "skipped rust: cargo not found"
fi

echo "julia: written (bindings/julia/LibDDP/examples/train_digits.jl), not run: no Julia runtime here"
[ "$ran" -gt 0 ] || { echo "FAIL: no language could run"; exit 1; }
echo "PASS: $ran languages train with the C job's losses and held-out accuracy"
