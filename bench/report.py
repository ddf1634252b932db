"""Prints a benchmark table from JSON lines (impl, bytes, p50_us, p90_us):
latency, algbw, busbw (ring all-reduce: algbw * 2(n-1)/n) and the ratio of
each implementation's p50 to the baseline's. An (impl, size) measured in
several rounds shows the median of the rounds' p50 and p90. "paired diff",
where a benchmark gives it, is the median of per-iteration differences."""
import json
import statistics
import sys


def main(path, world, baseline):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    rounds = {}
    for r in rows:
        rounds.setdefault((r["bytes"], r["impl"]), []).append(r)
    by = {}
    for (size, impl), rs in rounds.items():
        merged = dict(rs[0])
        merged["p50_us"] = statistics.median(x["p50_us"] for x in rs)
        merged["p90_us"] = statistics.median(x["p90_us"] for x in rs)
        by.setdefault(size, {})[impl] = merged
    impls = sorted({r["impl"] for r in rows}, key=lambda i: (i != "capi", i != baseline, i))
    print(f"{'bytes':>10} {'impl':>18} {'p50 us':>10} {'p90 us':>10} {'algbw GB/s':>11} {'busbw GB/s':>11} "
          f"{'p50 / ' + baseline:>14} {'paired diff p50 us':>19}")
    for size in sorted(by):
        base = by[size].get(baseline)
        for impl in impls:
            r = by[size].get(impl)
            if not r:
                continue
            alg = size / (r["p50_us"] * 1e-6) / 1e9
            bus = alg * 2 * (world - 1) / world
            ratio = f"{r['p50_us'] / base['p50_us']:.3f}" if base else "-"
            diff = f"{r['paired_diff_p50_us']:+.1f}" if "paired_diff_p50_us" in r and impl != baseline else "-"
            print(f"{size:>10} {impl:>18} {r['p50_us']:>10.1f} {r['p90_us']:>10.1f} {alg:>11.3f} {bus:>11.3f} "
                  f"{ratio:>14} {diff:>19}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "c10d")
