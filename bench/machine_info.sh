#!/usr/bin/env bash
# What the figures of scripts/bench.sh were measured on, as one JSON object
# in $1: CPU, cores, memory, kernel, glibc, compiler, torch, Lightning,
# MPICH, and two bandwidths measured now: one process's memcpy (64 MiB,
# bench_allreduce's memcpy mode) and TCP over loopback (loopback_bandwidth.py).
source "$(dirname "$0")/common.sh"
cmake --build "$build" -j 2 --target bench_allreduce >/dev/null
memcpy=$(BENCH_IMPL=memcpy BENCH_ROUNDS=3 BENCH_MIN_BYTES=$((64 << 20)) BENCH_MAX_BYTES=$((64 << 20)) \
  "$build/bench/bench_allreduce" | tail -n 1)
loopback=$("$py" "$here/bench/loopback_bandwidth.py")
"$py" - "$1" "$memcpy" "$loopback" <<'PY'
import json, os, platform, subprocess, sys

def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:
        return f"unavailable ({e.__class__.__name__})"

def version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return "not installed"

cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
mem_kib = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal"))
cp = json.loads(sys.argv[2])
info = {
    "cpu": cpu,
    "cores": os.cpu_count(),
    "memory_gib": round(mem_kib / 2**20, 1),
    "kernel": platform.release(),
    "glibc": " ".join(platform.libc_ver()),
    "compiler": run("c++", "--version").splitlines()[0] if run("c++", "--version") else "unknown",
    "python": platform.python_version(),
    "torch": version("torch"),
    "lightning": version("pytorch_lightning"),
    "mpich": (run("mpichversion").splitlines() or ["not installed"])[0].split(":", 1)[-1].strip(),
    "memcpy_GBps": cp["bytes"] / (cp["p50_us"] * 1e-6) / 1e9,
    "loopback_GBps": json.loads(sys.argv[3])["loopback_GBps"],
}
json.dump(info, open(sys.argv[1], "w"), indent=1)
for k, v in info.items():
    print(f"{k}: {v}")
PY
