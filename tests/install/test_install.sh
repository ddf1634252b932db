#!/usr/bin/env bash
# Installs libddp into a temporary prefix, then builds the C collectives demo
# twice from outside the tree, with nothing but pkg-config and then with the
# CMake package, and runs each on 2 ranks with the installed ddprun, without
# LD_LIBRARY_PATH.   test_install.sh <build dir> <source dir>
set -euo pipefail
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
unset LD_LIBRARY_PATH
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/ddp/ddp.h bin/ddprun; do
  [ -e "$prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
lib=$(ls "$prefix"/lib*/libddp.so.0)
[ "$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" = libddp.so.0 ] || { echo "SONAME is not libddp.so.0"; exit 1; }

run_two_ranks() {  # <program>: the demo prints "rank r/2 ..." lines; both ranks must finish
  local out
  out=$(OMP_NUM_THREADS=1 timeout 120 "$prefix/bin/ddprun" --standalone --nproc-per-node 2 "$1")
  echo "$out" | tail -4
  [ "$(echo "$out" | grep -c 'sum=\[1 3 5\]')" -ge 2 ] || { echo "$1: unexpected output"; exit 1; }
}

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig
echo "pkg-config: $(pkg-config --cflags --libs ddp)"
cc -std=c99 -o "$tmp/demo_pkgconfig" "$src/examples/c/allreduce_demo.c" $(pkg-config --cflags --libs ddp)
run_two_ranks "$tmp/demo_pkgconfig"

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DDDP_EXAMPLE="$src/examples/c/allreduce_demo.c" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
run_two_ranks "$tmp/consumer/demo_cmake"
echo "install test passed"
