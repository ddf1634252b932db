"""Table of bench/run_shm.sh: per size, the shm and gloo all-reduce (median
over rounds of each round's p50), their bus bandwidth (algbw * 2(n-1)/n),
shm's bus bandwidth over gloo's, shm's latency over gloo's, one process's
memcpy bandwidth measured in the same run and shm's bus bandwidth as a
fraction of it."""
import json
import statistics
import sys


def main(path, world):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    p50 = {}
    for r in rows:
        p50.setdefault((r["bytes"], r["impl"]), []).append(r["p50_us"])
    med = {k: statistics.median(v) for k, v in p50.items()}
    bus = lambda size, us: size / (us * 1e-6) / 1e9 * 2 * (world - 1) / world
    print(f"{'bytes':>10} {'shm us':>9} {'gloo us':>9} {'shm/gloo time':>14} {'shm busbw':>10} {'gloo busbw':>10} "
          f"{'busbw x':>8} {'memcpy GB/s':>12} {'shm/memcpy':>11}")
    for size in sorted({s for s, _ in med}):
        shm, gloo, cp = med.get((size, "capi-shm")), med.get((size, "capi-gloo")), med.get((size, "memcpy"))
        if shm is None or gloo is None:
            continue
        copy_bw = size / (cp * 1e-6) / 1e9 if cp else float("nan")
        print(f"{size:>10} {shm:>9.1f} {gloo:>9.1f} {shm / gloo:>14.3f} {bus(size, shm):>10.2f} {bus(size, gloo):>10.2f} "
              f"{gloo / shm:>8.2f} {copy_bw:>12.2f} {bus(size, shm) / copy_bw:>11.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
