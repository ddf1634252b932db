#!/usr/bin/env bash
# The whole test suite: bootstraps, builds, and runs CTest (GoogleTest
# multi-process tests, the header test, and the pytest parity tests).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/build.sh"
build="${DDP_BUILD_DIR:-$here/build}"
cd "$build"
# Two tests at a time (DDP_TEST_JOBS): the suite's tests wait on each other's
# ranks and on Python far more than they compute, and run so on a 2-core
# machine in about 60% of the serial time.
ctest --output-on-failure --timeout 600 -j "${DDP_TEST_JOBS:-2}" "$@"
