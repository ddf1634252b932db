# Sourced by the bench/run_*.sh scripts: builds (quietly) and defines
#   here (repository root), build (build directory), py (the venv's python),
#   port (prints a free TCP port on 127.0.0.1).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/build.sh" >/dev/null
build="${DDP_BUILD_DIR:-$here/build}"
py="$here/.venv/bin/python"
export OMP_NUM_THREADS=1
port() { "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
