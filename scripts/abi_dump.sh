#!/usr/bin/env bash
# Regenerates the committed ABI description (capi/abi/) from build/: run it,
# on purpose, when the public ABI changes (a new function, a new options
# field behind a version bump), and commit the result with the change.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
source "$here/tests/abi/abi_common.sh"
lib="$build/capi/libddp.so"
abi_dump "$lib" "$here/capi/include/ddp" "$here/capi/abi/libddp.abi"
abi_symbols "$lib" >"$here/capi/abi/symbols.txt"
echo "capi/abi/: $(wc -l <"$here/capi/abi/symbols.txt") exported functions recorded"
