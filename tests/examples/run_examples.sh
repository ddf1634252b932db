#!/usr/bin/env bash
# Runs each language's example (2-rank all-reduce and a gradient-sync step)
# through ddprun and checks that both ranks printed the averaged gradient.
#   run_examples.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
ddprun="$build/tools/ddprun"
export OMP_NUM_THREADS=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
expect_two() {  # <label> <output>: both ranks printed the average
  local n
  n=$(grep -c 'averaged bias grad.*0.5.*1.5.*2.5.*3.5' <<<"$2" || true)
  [ "$n" = 2 ] || { echo "$1: expected the averaged gradient from 2 ranks, got:"; echo "$2"; exit 1; }
  echo "$1: ok"
}
expect_two C "$("$ddprun" --standalone --nproc-per-node 2 "$build/examples/grad_sync")"
if [ -d "$build/bindings/python/libddp" ]; then
  expect_two Python "$(PYTHONPATH="$build/bindings/python" "$ddprun" --standalone --nproc-per-node 2 \
    "${DDP_PYTHON:-python3}" "$src/examples/python/allreduce_and_grad_sync.py")"
fi
if [ -f "$build/bindings/java/libddp.jar" ]; then
  javac -nowarn -cp "$build/bindings/java/libddp.jar" -d "$tmp" "$src/examples/java/AllReduceAndGradSync.java"
  expect_two Java "$("$ddprun" --standalone --nproc-per-node 2 java -Djava.library.path="$build/bindings/java" \
    -cp "$build/bindings/java/libddp.jar:$tmp" AllReduceAndGradSync)"
fi
if command -v cargo >/dev/null; then
  PKG_CONFIG_PATH="$build" CARGO_TARGET_DIR="$build/rust-target" cargo build --offline --quiet \
    --manifest-path "$src/bindings/rust/Cargo.toml" --example allreduce_and_grad_sync
  expect_two Rust "$("$ddprun" --standalone --nproc-per-node 2 "$build/rust-target/debug/examples/allreduce_and_grad_sync")"
fi
