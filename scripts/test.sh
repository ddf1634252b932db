#!/usr/bin/env bash
# The whole test suite: bootstraps, builds, and runs CTest (GoogleTest
# multi-process tests, the header test, and the pytest parity tests).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/build.sh"
build="${DDP_BUILD_DIR:-$here/build}"
cd "$build"
# Two tests at a time (DDP_TEST_JOBS): most tests wait on their ranks and on
# Python more than they compute. On a 2-core VM the main suite took 1116 s
# so against 1602 s one at a time, and every test passed either way.
ctest --output-on-failure --timeout 600 -j "${DDP_TEST_JOBS:-2}" "$@"
