#!/usr/bin/env bash
# The parity suites (libddp from Python, compared with PyTorch and Lightning
# on the same inputs, many at the edges of their ranges) against a libddp
# built with UBSan alone, in build-ubsan/. scripts/test_sanitize.sh leaves
# them out: its ASan runtime would have to be preloaded into CPython.
# UBSan's runtime loads with the library. vptr is off: it needs the typeinfo
# of LibTorch classes that the wheel does not export.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/bootstrap.sh"
build="$here/build-ubsan"
flags="-fsanitize=undefined -fno-sanitize=vptr -fno-sanitize-recover=all"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=undefined -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=undefined \
    -DDDP_BUILD_BENCH=OFF -DDDP_WITH_NCCL=OFF -DDDP_BUILD_BINDINGS=OFF >/dev/null
fi
# Only what the parity suites run: the library and its programs, not the
# GoogleTest programs (a cold UBSan build of everything took about 25
# minutes on a 2-core VM).
cmake --build "$build" -j "${DDP_JOBS:-2}" --target parity_programs
cd "$build"
# pytest captures a test's stderr and loses it when UBSan ends the process:
# the reports go to files, printed here.
rm -f "$build"/ubsan-report.*
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$build/ubsan-report" OMP_NUM_THREADS=1
status=0
ctest --output-on-failure --timeout 900 -j "${DDP_TEST_JOBS:-2}" -L parity "$@" || status=$?
for report in "$build"/ubsan-report.*; do
  [ -f "$report" ] || continue
  echo "== UBSan: $report"
  cat "$report"
  status=1
done
exit "$status"
