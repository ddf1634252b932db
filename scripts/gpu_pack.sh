#!/usr/bin/env bash
# Packs what `scripts/gpu_check.sh --prebuilt` runs into .gpu/build (ignored by
# git, carried to a lent GPU machine): libddp, its NCCL plugin, the tests with
# CUDA cases, the main job and the DDP step benchmark, built here against the
# pinned wheel and stripped of debug info (about 4 MiB). A lent machine has
# minutes, not the quarter hour a LibTorch build takes; where its torch is the
# pinned version (2.11.0+cu130 on the device machines), these binaries run there
# with LibTorch found through LD_LIBRARY_PATH.
# Where MPICH is installed here, its runtime (mpiexec, the proxy, libmpich and
# what they link beyond glibc; about 45 MiB) goes into .gpu/mpich with the
# shm benchmark and its MPI peer, so the lent machine's CPUs, which have no
# MPICH, give a second machine's shm/MPICH/Gloo table (issue 28).
# Usage: scripts/gpu_pack.sh   then, on the device: bash scripts/gpu_check.sh --prebuilt
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build="${DDP_BUILD_DIR:-$here/build}"
[ -f "$build/CMakeCache.txt" ] || "$here/scripts/build.sh" >/dev/null
cmake --build "$build" -j2 --target ddp ddp_nccl test_capi test_comm_hooks train_digits bench_ddp_step >/dev/null
out="$here/.gpu/build"
rm -rf "$here/.gpu"
for f in capi/libddp.so.0 capi/libddp_nccl.so tests/capi/test_capi tests/capi/test_comm_hooks \
         examples/train_digits bench/bench_ddp_step; do
  mkdir -p "$out/$(dirname "$f")"
  strip --strip-debug -o "$out/$f" "$build/$f"
done
"$here/.venv/bin/python" -c 'import torch; print(torch.__version__)' >"$here/.gpu/torch_version"
if command -v mpiexec.hydra >/dev/null && cmake --build "$build" -j2 --target bench_allreduce bench_mpi_allreduce >/dev/null 2>&1; then
  for f in bench/bench_allreduce bench/bench_mpi_allreduce; do strip --strip-debug -o "$out/$f" "$build/$f"; done
  mpich="$here/.gpu/mpich"
  mkdir -p "$mpich/bin" "$mpich/lib"
  bins=("$(command -v mpiexec.hydra)" "$(command -v hydra_pmi_proxy)")
  cp "${bins[@]}" "$mpich/bin/"
  cp "${bins[0]}" "$mpich/bin/mpiexec"
  # Every library they need beyond glibc and the C++ runtime, which the lent machine has (newer).
  ldd "${bins[@]}" "$build/bench/bench_mpi_allreduce" | awk '/=> \//{print $3}' | sort -u |
    grep -vE '/lib(c|m|dl|rt|pthread|resolv|stdc\+\+|gcc_s)\.so' | xargs -r cp -L -t "$mpich/lib/"
fi
du -sh "$here/.gpu" | cut -f1 | sed "s|^|packed $here/.gpu for torch $(cat "$here/.gpu/torch_version"): |"
