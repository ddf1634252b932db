#!/usr/bin/env bash
# The whole test suite: bootstraps, builds, and runs CTest (GoogleTest
# multi-process tests, the header test, and the pytest parity tests).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/build.sh"
build="${DDP_BUILD_DIR:-$here/build}"
cd "$build"
ctest --output-on-failure --timeout 600 "$@"
