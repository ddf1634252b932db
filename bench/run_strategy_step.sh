#!/usr/bin/env bash
# The training step through libddp's strategy against PyTorch DDP and
# Lightning's Trainer (issue 12), 2 CPU ranks, in one run: the MLP (~9.4 M
# parameters), the small conv net and the main job's digits MLP
# (64-128-64-10) of bench_ddp_models.py, batch 32 per
# rank, SGD, each contender measured the same way (a barrier, then one
# step: zero_grad, forward, loss, backward with the gradient reduction,
# optimizer step); plus the same step in one process without any
# distribution (the compute every contender shares), on the eager module and
# on the TorchScript export that libddp trains; and libddp again without its
# host block cache (DDP_HOST_CACHE_MB=0), to show its part, and in one
# process (what libddp's distribution adds to its own step). The contenders
# alternate for BENCH_REPEATS (3) rounds; medians of the rounds' p50.
# Prints step time, samples/s (both ranks) and per-step overhead (step
# minus compute) with libddp's over each peer's.
source "$(dirname "$0")/common.sh"
steps=${STEPS:-20}
out=$(mktemp)
models=$(mktemp -d)
trap 'rm -rf "$out" "$models"' EXIT
"$py" "$here/bench/export_bench_models.py" "$models"
ddprun() { "$build/tools/ddprun" --standalone --nproc-per-node "${NPROC:-2}" --local-ranks-filter 0 "$@" \
             | sed -n 's/^\[rank0\]: \({.*}\)$/\1/p' >>"$out"; }
for ((rep = 0; rep < ${BENCH_REPEATS:-3}; rep++)); do
  for model in mlp conv digits; do
    case $model in
      mlp) shape="32 1024" ;;
      conv) shape="32 3 32 32" ;;
      digits) shape="32 64" ;;
    esac
    ddprun "$build/bench/bench_strategy_step" "$model" "$models/$model.pt" "$steps" $shape
    DDP_HOST_CACHE_MB=0 ddprun "$build/bench/bench_strategy_step" "$model" "$models/$model.pt" "$steps" $shape
    NPROC=1 OMP_NUM_THREADS=1 ddprun "$build/bench/bench_strategy_step" "$model" "$models/$model.pt" "$steps" $shape
    ddprun --python "$py" "$here/bench/bench_ddp_step_torch.py" "$model" 25 "$steps"
    "$py" "$here/bench/bench_ddp_step_lightning.py" "$model" "$steps" 2>/dev/null | grep '^{' >>"$out" || true
    "$py" "$here/bench/bench_compute_only.py" "$model" "$steps" "$models/$model.pt" >>"$out"
  done
done
"$py" - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def p50(impl, model):
    v = [r["step_ms_p50"] for r in rows if r["impl"] == impl and r["model"] == model]
    return statistics.median(v) if v else None
names = {"libddp-strategy": "libddp strategy", "pytorch-ddp": "PyTorch DDP", "lightning-trainer": "Lightning"}
more = {"libddp-strategy-nocache": "  no host cache", "libddp-strategy-1rank": "  1 process"}
for m in ("mlp", "conv", "digits"):
    compute = p50("compute-only", m)
    print(f"{m}: single-process compute {compute:.2f} ms per step")
    print(f"  {'contender':16} {'step ms':>8} {'samples/s':>10} {'overhead ms':>12}")
    for impl, label in list(names.items()) + list(more.items()):
        t = p50(impl, m)
        if t is not None:
            print(f"  {label:16} {t:8.2f} {2 * 32 / t * 1e3:10.0f} {t - compute:12.2f}")
    lib, ddp, pl = (p50(i, m) for i in names)
    for peer, t in (("PyTorch DDP", ddp), ("Lightning", pl)):
        if lib and t and t > compute:
            print(f"  libddp / {peer}: step {lib / t:.3f}, overhead {(lib - compute) / (t - compute):.3f}")
    alone = p50("libddp-strategy-1rank", m)
    if lib and alone:
        # Against libddp's own single-process step (the same program, no peer):
        # what distribution adds, apart from how fast each runs its compute.
        print(f"  libddp's 2-rank step minus its own 1-process step: {lib - alone:.2f} ms" +
              "".join(f", {(lib - alone) / (t - compute):.3f} of {peer}'s overhead" for peer, t in
                      (("PyTorch DDP", ddp), ("Lightning", pl)) if t and t > compute))
    script = p50("compute-only-torchscript", m)
    if lib and script:
        # libddp trains the TorchScript export; the peers train the eager module.
        print(f"  the TorchScript module's own step: {script:.2f} ms ({script - compute:+.2f} vs eager); libddp's "
              f"overhead over it {lib - script:.2f} ms" +
              "".join(f", {(lib - script) / (t - compute):.3f} of {peer}'s" for peer, t in
                      (("PyTorch DDP", ddp), ("Lightning", pl)) if t and t > compute))
PY
