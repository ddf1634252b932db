#!/usr/bin/env bash
# The C API's reference from the headers' comments (Doxygen, docs/Doxyfile):
# HTML into OUT (default build/docs/html), installed by `cmake --install`
# under share/doc/libddp/html once built. Fails, listing them, on any
# warning: an undocumented public symbol, a broken reference.
#   bash scripts/docs.sh [OUT_PARENT]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/build/docs}
command -v doxygen >/dev/null || { echo "docs.sh: doxygen not found (scripts/bootstrap.sh installs it)"; exit 77; }
mkdir -p "$out"
warnings=$(cd "$here" && { cat docs/Doxyfile; echo "OUTPUT_DIRECTORY = $out"; } | doxygen - 2>&1 >/dev/null | grep -i "warning" || true)
if [ -n "$warnings" ]; then
  echo "$warnings"
  echo "docs.sh: $(echo "$warnings" | wc -l) warning(s): document every public symbol"
  exit 1
fi
echo "docs.sh: $(ls "$out/html"/*.html | wc -l) pages in $out/html, no warning"
