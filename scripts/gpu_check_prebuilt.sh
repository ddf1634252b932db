#!/usr/bin/env bash
# The CUDA checks on a lent GPU machine, over the binaries scripts/gpu_pack.sh
# packed into .gpu/build here (no build there): the C API's NCCL and CUDA
# tensor cases, the comm hooks on CUDA buffers, the main job on CUDA against
# its CPU loss curve, the main job's options on CUDA (each must finish and
# report a held-out accuracy), two ranks asking for a GPU each on a machine
# with one (a clear error on both, no hang), and the CUDA DDP step benchmark.
# Every step has a time limit; the summary names each step ok or FAILED, and
# the exit status is 1 when any failed. Logs go to $OUT (or /tmp/gpu_check).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="$here/.gpu/build"
py="${DDP_PYTHON:-$(command -v python3)}"
logs="${OUT:-/tmp/gpu_check}"
mkdir -p "$logs"
[ -x "$build/tests/capi/test_capi" ] || { echo "no $build: run scripts/gpu_pack.sh here first and carry .gpu"; exit 2; }
torchlib=$("$py" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
have=$("$py" -c 'import torch; print(torch.__version__)')
want=$(cat "$here/.gpu/torch_version")
[ "$have" = "$want" ] || { echo "this machine's torch is $have; .gpu was built for $want: build here instead (scripts/gpu_check.sh)"; exit 2; }
export LD_LIBRARY_PATH="$build/capi:$torchlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" OMP_NUM_THREADS=1
nvidia-smi -L || true
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.nccl.version())"

summary=() failed=0
# step NAME LIMIT_S COMMAND...: runs it with its log in $logs/NAME.log and its tail here.
step() {
  local name=$1 limit=$2; shift 2
  local t0=$SECONDS rc=0
  timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1 || rc=$?
  tail -n 6 "$logs/$name.log" | sed "s/^/  [$name] /"
  if [ $rc -eq 0 ]; then summary+=("ok      $name ($((SECONDS - t0)) s)")
  else summary+=("FAILED  $name (rc $rc, $((SECONDS - t0)) s)"); failed=1; fi
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$here/examples/digits/export_digits.py" "$work/plain" >/dev/null
"$py" "$here/examples/digits/export_digits.py" "$work/bn" --batchnorm >/dev/null

step capi_cuda 120 "$build/tests/capi/test_capi" --gtest_filter='Nccl.*:CApi.VersionStatusAndTensors:Gloo.*'
step comm_hooks 180 "$build/tests/capi/test_comm_hooks"
step digits_cuda_follows_cpu 300 bash "$here/tests/strategy/test_digits_job_cuda.sh" "$build" "$here" "$py"
# The job's options on CUDA: each must train to the end and print its accuracy.
job() { local name=$1 data=$2; shift 2
  step "job_$name" 180 bash -c '"$@" | grep "held-out accuracy"' _ "$build/examples/train_digits" "$work/$data" \
    --world 1 --launcher popen --epochs 1 --accelerator cuda --ckpt "$work/$name.ckpt" "$@"; }
job precision_16_mixed plain --precision 16-mixed
job precision_bf16_mixed plain --precision bf16-mixed
job fp16_hook_bucket_view plain --comm-hook fp16 --gradient-as-bucket-view
job static_graph_clip plain --static-graph --clip 0.5
job find_unused_adamw plain --find-unused --optimizer adamw --warmup-cosine 5
job sync_batchnorm bn --sync-batchnorm
job spawn_launcher plain --launcher spawn
job export plain --export "$work/digits.pt"
step exported_model_loads 60 "$py" -c "import torch, sys; m = torch.jit.load(sys.argv[1], map_location='cuda'); \
print('exported model output', tuple(m(torch.zeros(2, 64, device='cuda')).shape))" "$work/digits.pt"
# Checkpoints on CUDA: resumed on CUDA, resumed on the CPU, read by torch.load,
# and the checkpoint directory every N steps; post-local SGD's averaging on CUDA.
run_job() { "$build/examples/train_digits" "$work/plain" --world 1 --launcher popen "$@"; }
step resume_on_cuda 180 bash -c "$(declare -f run_job); build='$build' work='$work'
  run_job --epochs 2 --stop-after 1 --accelerator cuda --ckpt '$work/r.ckpt' >/dev/null &&
  run_job --epochs 2 --resume --accelerator cuda --ckpt '$work/r.ckpt' | grep -E 'resumed from|held-out'"
step cuda_checkpoint_resumes_on_cpu 180 bash -c "$(declare -f run_job); build='$build' work='$work'
  run_job --epochs 2 --stop-after 1 --accelerator cuda --ckpt '$work/x.ckpt' >/dev/null &&
  run_job --epochs 2 --resume --accelerator cpu --ckpt '$work/x.ckpt' | grep -E 'resumed from|held-out'"
step cuda_checkpoint_loads_in_torch 60 "$py" -c "import torch, sys; c = torch.load(sys.argv[1], map_location='cpu', \
weights_only=False); print('torch.load:', sorted(c)[:6], {k: str(v.device) for k, v in list(c['state_dict'].items())[:1]})" \
  "$work/r.ckpt"
job ckpt_dir_every_5_steps plain --ckpt-dir "$work/ckpts" --keep-last 2 --every-n-steps 5
job post_localsgd plain --epochs 2 --post-localsgd 3 --averaging-period 2
# Two ranks, one GPU: rank 1 asks for cuda:1. Both must end with a message, within the limit.
step two_ranks_one_gpu_is_refused 120 bash -c '! "$@" 2>&1 | tee /dev/stderr | grep -q "held-out accuracy"' _ \
  "$build/examples/train_digits" "$work/plain" --world 2 --launcher popen --epochs 1 --accelerator cuda
step ddp_step_cuda_bench 300 env ROUNDS="${ROUNDS:-1}" STEPS="${STEPS:-30}" DDP_BUILD_DIR="$build" DDP_PYTHON="$py" \
  bash "$here/bench/run_ddp_step_cuda.sh"
# Issue 28 on this machine's CPUs: shm against MPICH (packed by gpu_pack.sh
# where this machine has none) and Gloo, 2 and 4 ranks, all-reduce to 256 MiB,
# DDP's bucket path from 1 to 64 MiB, then broadcast and all_gather to 64 KiB. SHM_BENCH=0 skips them.
if [ "${SHM_BENCH:-1}" != 0 ] && [ -x "$build/bench/bench_allreduce" ]; then
  [ -d "$here/.gpu/mpich" ] && export PATH="$here/.gpu/mpich/bin:$PATH" \
    LD_LIBRARY_PATH="$here/.gpu/mpich/lib:$LD_LIBRARY_PATH"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)|L[23])' >"$logs/cpu.txt" || true
  shm_bench() { local name=$1 limit=$2; shift 2
    step "$name" "$limit" env DDP_BUILD_DIR="$build" DDP_PYTHON="$py" WORLDS="2 4" "$@" \
      bash "$here/bench/run_shm_vs_mpi.sh" "$logs/$name.jsonl"; }
  shm_bench shm_vs_mpich_allreduce 330 BENCH_REPEATS="${BENCH_REPEATS:-3}"
  # DDP's bucket path, 1 to 64 MiB: on shm a gradient_as_bucket_view bucket
  # is reduced where every rank maps it (2 bytes moved per byte per rank,
  # against 4.5 through the slots): the 16 MiB lead over Gloo where memory
  # traffic bounds the all-reduce above (the Xeon's 2.45x and 1.49x).
  shm_bench shm_vs_mpich_bucket_view 150 BENCH_OP=reducer_view BENCH_MIN_BYTES=1048576 BENCH_MAX_MB=64 \
    BENCH_REPEATS="${BENCH_REPEATS:-3}"
  shm_bench shm_vs_mpich_broadcast 90 BENCH_OP=broadcast BENCH_MAX_BYTES=65536
  shm_bench shm_vs_mpich_all_gather 90 BENCH_OP=all_gather BENCH_MAX_BYTES=65536
fi
printf '%s\n' "${summary[@]}"
exit $failed
