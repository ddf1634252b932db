#!/usr/bin/env bash
# The host block cache changes no result: the bench MLP and conv net
# (tensors of up to 16 MiB, so their activations, gradients and buckets come
# from the cache) trained through the strategy on 2 ranks give rank 0 the
# same loss, to all 9 digits, at every step with the cache (default), with a
# cache small enough to evict all the time (8 MiB), and without it
# (DDP_HOST_CACHE_MB=0).
#   test_host_cache_job.sh <build dir> <source dir> <python>
set -euo pipefail
build=$1 src=$2 py=$3
bin="$build/bench/bench_strategy_step"
[ -x "$bin" ] || { echo "skipped: $bin was not built (DDP_BUILD_BENCH=OFF)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/bench/export_bench_models.py" "$work"
losses() {  # <model> <shape...>: rank 0's "loss <step> <value>" lines
  local model=$1
  shift
  OMP_NUM_THREADS=1 BENCH_PRINT_LOSSES=1 "$build/tools/ddprun" --standalone --nproc-per-node 2 \
    --local-ranks-filter 0 "$bin" "$model" "$work/$model.pt" 9 "$@" | sed -n 's/^\[rank0\]: \(loss .*\)$/\1/p'
}
for spec in "mlp 32 1024" "conv 32 3 32 32"; do
  set -- $spec
  cached=$(losses "$@")
  [ "$(echo "$cached" | wc -l)" -eq 12 ] || { echo "FAIL: $1: not 12 loss lines: $cached"; exit 1; }
  first=$(echo "$cached" | head -1 | cut -d' ' -f3) last=$(echo "$cached" | tail -1 | cut -d' ' -f3)
  [ "$first" != "$last" ] || { echo "FAIL: $1: the loss did not move ($first)"; exit 1; }
  evicting=$(DDP_HOST_CACHE_MB=8 losses "$@")
  uncached=$(DDP_HOST_CACHE_MB=0 losses "$@")
  diff <(echo "$uncached") <(echo "$cached") || { echo "FAIL: $1: the cache changed the losses"; exit 1; }
  diff <(echo "$uncached") <(echo "$evicting") || { echo "FAIL: $1: a small, evicting cache changed the losses"; exit 1; }
  echo "$1: 12 steps, loss $first -> $last, the same with the cache, an evicting one and none"
done
