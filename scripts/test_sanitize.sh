#!/usr/bin/env bash
# The C/C++ test suite under AddressSanitizer + UBSan (Debug build in
# build-asan/). The Python parity test is left out: it would need the ASan
# runtime preloaded into CPython.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/bootstrap.sh"
build="$here/build-asan"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDDP_SANITIZE=ON \
    -DDDP_BUILD_BENCH=OFF -DDDP_WITH_NCCL=OFF >/dev/null
fi
cmake --build "$build" -j "${DDP_JOBS:-2}"
cd "$build"
# allocator_may_return_null: an allocation too large for ASan's allocator
# (above 1 TiB) fails as malloc fails, which libddp must turn into
# DDP_E_NOMEM (the out-of-memory tests ask for 256 TiB), instead of ASan
# ending the process.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  LSAN_OPTIONS="suppressions=$here/scripts/lsan.supp"
ctest --output-on-failure --timeout 600 -j "${DDP_TEST_JOBS:-2}" -LE "parity|packaging|bindings|fuzz" "$@"
