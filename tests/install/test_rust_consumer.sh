#!/usr/bin/env bash
# A Rust program of a user's own: a new crate depending on `ddp` by path
# builds with cargo, ddp-sys finding libddp through pkg-config with
# PKG_CONFIG_PATH relative to where cargo runs (`PKG_CONFIG_PATH=build`) and
# absolute; the program then runs a 2-rank all-reduce under ddprun. Without
# PKG_CONFIG_PATH (and no installed libddp) the build stops with ddp-sys's
# message saying what to set.
#   test_rust_consumer.sh <build dir> <source dir>
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
command -v cargo >/dev/null || { echo "skipped: cargo not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/consumer/src"
cat > "$work/consumer/Cargo.toml" <<TOML
[package]
name = "consumer"
version = "0.1.0"
edition = "2021"

[dependencies]
ddp = { path = "$src/bindings/rust/ddp" }

[workspace]
TOML
cat > "$work/consumer/src/main.rs" <<'RS'
fn main() -> Result<(), ddp::Error> {
    let g = ddp::Group::from_env()?;
    let mut x = vec![g.rank() as f32 + 1.0; 3];
    g.all_reduce(&mut x, ddp::ReduceOp::Sum)?;
    println!("rank {} sum {:?}", g.rank(), x);
    Ok(())
}
RS
export CARGO_TARGET_DIR="$work/target"
libdir=$(PKG_CONFIG_PATH="$build" pkg-config --variable=libdir ddp-uninstalled 2>/dev/null || dirname "$(ls "$build"/capi/libddp.so)")
# Relative: from the build directory's parent, PKG_CONFIG_PATH names it by its own name.
(cd "$(dirname "$build")" && PKG_CONFIG_PATH="$(basename "$build")" cargo build --offline --quiet \
  --manifest-path "$work/consumer/Cargo.toml")
out=$(LD_LIBRARY_PATH="$libdir" OMP_NUM_THREADS=1 "$build/tools/ddprun" --standalone --nproc-per-node 2 \
  "$work/target/debug/consumer" 2>&1)
echo "$out"
for r in 0 1; do
  grep -q "rank $r sum \[3.0, 3.0, 3.0\]" <<<"$out" || { echo "FAIL: rank $r's sum is missing"; exit 1; }
done
# Absolute, from anywhere (a clean build of ddp-sys, so its build script runs again).
rm -rf "$work/target"
(cd / && PKG_CONFIG_PATH="$build" cargo build --offline --quiet --manifest-path "$work/consumer/Cargo.toml")
# None: ddp-sys says what to set (unless a libddp is installed system-wide).
rm -rf "$work/target"
if ! pkg-config --exists ddp 2>/dev/null; then
  set +e
  msg=$(cd / && env -u PKG_CONFIG_PATH cargo build --offline --quiet --manifest-path "$work/consumer/Cargo.toml" 2>&1)
  rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q "set PKG_CONFIG_PATH to the directory of ddp.pc" <<<"$msg" ||
    { echo "FAIL: without PKG_CONFIG_PATH: exit $rc: $msg"; exit 1; }
fi
echo "PASS: a consumer crate builds with relative and absolute PKG_CONFIG_PATH and runs"
