#!/usr/bin/env bash
# ThreadSanitizer over libddp's LibTorch-free concurrent parts (the flight
# recorder's ring and dumps, the store server and clients): builds
# tests/tsan/ with clang into build-tsan/ and runs its stress program.
# Exits 77 (skipped, saying why) without clang. LibTorch is not built with
# TSan, so the parts that run inside it (the reducer, the backends) stay
# with the ASan+UBSan suite (scripts/test_sanitize.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out="${DDP_TSAN_BUILD_DIR:-$here/build-tsan}"
if ! command -v clang++ >/dev/null; then
  echo "skipped: clang++ is not installed (Debian: clang)"
  exit 77
fi
cmake -S "$here/tests/tsan" -B "$out" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$out" -j2 >/dev/null
# No suppressions: every report fails the run.
TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1" "$out/tsan_stress"
