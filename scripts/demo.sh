#!/usr/bin/env bash
# The main job: builds libddp, exports scikit-learn's handwritten digits and
# a TorchScript MLP (examples/digits/export_digits.py), and trains it from C
# through the strategy on ${WORLD:-2} CPU processes (examples/c/train_digits.c):
# one line per epoch from rank 0, a checkpoint per epoch, the held-out
# accuracy at the end. Extra arguments go to train_digits (e.g. --resume,
# --epochs N). The collectives demo is scripts/collectives_demo.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/build.sh"
build="${DDP_BUILD_DIR:-$here/build}"
data="$build/digits"
[ -f "$data/mlp.pt" ] || "$here/.venv/bin/python" "$here/examples/digits/export_digits.py" "$data"
OMP_NUM_THREADS=1 exec "$build/examples/train_digits" "$data" --world "${WORLD:-2}" "$@"
