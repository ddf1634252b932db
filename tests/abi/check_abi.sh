#!/usr/bin/env bash
# ABI guard: the built libddp.so against the committed description in
# capi/abi/. A removed or changed function or type fails; additions pass
# (with a reminder to record them). Regenerate with scripts/abi_dump.sh.
#   check_abi.sh <libddp.so> <source dir>
set -euo pipefail
lib=$1 src=$2
source "$src/tests/abi/abi_common.sh"
# 77: CTest's "skipped" (SKIP_RETURN_CODE), with the reason.
command -v abidw >/dev/null || { echo "skipped: abidw not found (install abigail-tools; scripts/bootstrap.sh does)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
abi_symbols "$lib" >"$tmp/symbols.txt"
removed=$(comm -23 "$src/capi/abi/symbols.txt" "$tmp/symbols.txt")
added=$(comm -13 "$src/capi/abi/symbols.txt" "$tmp/symbols.txt")
if [ -n "$removed" ]; then
  echo "exported functions removed from libddp.so:"; echo "$removed"; exit 1
fi
abi_dump "$lib" "$src/capi/include/ddp" "$tmp/now.abi"
rc=0
abidiff "$src/capi/abi/libddp.abi" "$tmp/now.abi" >"$tmp/diff.txt" || rc=$?
if [ $((rc & 3)) -ne 0 ]; then
  echo "abidiff failed (status $rc)"; cat "$tmp/diff.txt"; exit 1
fi
# rc 0: identical; bit 4: some change (additions only are fine); bit 8: incompatible.
if [ $((rc & 8)) -ne 0 ] || { [ $((rc & 4)) -ne 0 ] &&
   ! { grep -q "Functions changes summary: 0 Removed, 0 Changed" "$tmp/diff.txt" &&
       grep -q "Variables changes summary: 0 Removed, 0 Changed" "$tmp/diff.txt"; }; }; then
  echo "the public ABI changed (regenerate capi/abi/ with scripts/abi_dump.sh if this is on purpose):"
  cat "$tmp/diff.txt"
  exit 1
fi
[ -z "$added" ] || { echo "new exported functions (record them with scripts/abi_dump.sh):"; echo "$added"; }
echo "ABI unchanged: $(wc -l <"$tmp/symbols.txt") exported functions"
