#!/usr/bin/env bash
# Python's call path to an all-reduce on 1 rank: libddp's SWIG binding vs
# torch.distributed, side by side in one process (see bench_bindings.py).
source "$(dirname "$0")/common.sh"
PYTHONPATH="$build/bindings/python" "$py" "$here/bench/bench_bindings.py" 2>/dev/null
