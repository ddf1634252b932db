#!/usr/bin/env bash
# The API references in one command, into OUT (default build/docs):
#   html/    the C API from the headers' comments (Doxygen, docs/Doxyfile),
#            installed by `cmake --install` under share/doc/libddp/html;
#   rust/    rustdoc of the `ddp` crate;
#   java/    Javadoc of org.libddp (when the Java binding is built);
#   python/  pydoc of the `libddp` package (when the Python binding is built).
# Fails, listing them, on any Doxygen warning (an undocumented public
# symbol, a broken reference) and on any public item of `ddp` without docs.
#   bash scripts/docs.sh [OUT]
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

build=$(cd "$out/.." && pwd)
if command -v cargo >/dev/null && [ -f "$build/ddp-uninstalled.pc" ]; then
  rust_log=$(PKG_CONFIG_PATH="$build" CARGO_TARGET_DIR="$build/rust-target" RUSTDOCFLAGS="-D missing_docs" \
    cargo doc --offline --no-deps --quiet -p ddp --manifest-path "$here/bindings/rust/Cargo.toml" 2>&1) ||
    { echo "$rust_log"; echo "docs.sh: rustdoc failed: document every public item of the ddp crate"; exit 1; }
  rm -rf "$out/rust" && cp -r "$build/rust-target/doc" "$out/rust"
  echo "docs.sh: rustdoc in $out/rust/ddp, every public item documented"
fi
if command -v javadoc >/dev/null && [ -d "$build/bindings/java/src/org/libddp" ]; then
  javadoc -quiet -Xdoclint:none -d "$out/java" "$build"/bindings/java/src/org/libddp/*.java >/dev/null 2>&1 &&
    echo "docs.sh: Javadoc in $out/java" || echo "docs.sh: javadoc failed (left out)"
fi
if [ -f "$build/bindings/python/libddp/__init__.py" ] && [ -x "$here/.venv/bin/python" ]; then
  mkdir -p "$out/python"
  (cd "$out/python" && PYTHONPATH="$build/bindings/python" "$here/.venv/bin/python" -m pydoc -w libddp libddp.ddp >/dev/null) &&
    echo "docs.sh: pydoc in $out/python" || echo "docs.sh: pydoc failed (left out)"
fi
