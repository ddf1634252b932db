#!/usr/bin/env bash
# Installs everything the build and the tests need, idempotently:
#   - Debian packages (compiler cache, SWIG, test frameworks),
#   - .venv/ with the pinned torch wheel (LibTorch comes from it) and the
#     Python peers the parity tests and benchmarks compare against.
# Fast when everything is already there: each step checks before it installs.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
source "$here/scripts/versions.sh"

need_apt=()
for pkg in $DDP_APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_apt[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

venv="$here/.venv"
stamp="$venv/.ddp-bootstrap-$DDP_VENV_STAMP"
if [ ! -f "$stamp" ]; then
  echo "bootstrap: preparing $venv (torch==$DDP_TORCH_VERSION)"
  # The wheel and its CUDA libraries take about 5 GiB unpacked; pip's cache
  # would hold a second, compressed copy that a fresh machine never reuses.
  free_kib=$(df -Pk "$here" | awk 'NR==2 {print $4}')
  if [ "${free_kib:-0}" -lt $((7 * 1024 * 1024)) ]; then
    echo "bootstrap: only $((free_kib / 1024)) MiB free under $here; .venv needs about 5 GiB and the builds 4 GiB more" >&2
  fi
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --progress-bar off --no-cache-dir --upgrade pip >/dev/null
  "$venv/bin/pip" install --quiet --progress-bar off --no-cache-dir \
      "torch==$DDP_TORCH_VERSION" $DDP_PY_PACKAGES
  rm -f "$venv"/.ddp-bootstrap-*
  touch "$stamp"
fi
