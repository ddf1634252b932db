#!/usr/bin/env bash
# Bootstraps (Debian packages, .venv with the pinned torch) and builds libddp
# into build/ with CMake + Ninja, two jobs (LibTorch translation units are big).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/bootstrap.sh"
build="${DDP_BUILD_DIR:-$here/build}"
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
fi
cmake --build "$build" -j "${DDP_JOBS:-2}"
