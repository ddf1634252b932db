"""Table of bench/run_shm_vs_mpi.sh: per world size and message size, each
contender's p50 and p90 (medians over the rounds), shm's p50 over MPICH's
and over Gloo's, and flags: "slower" where shm's p50 exceeds MPICH's,
"tail" where shm's p90 exceeds 1.5x its p50, each slower size with both
means (a p50 can hide stalls: MPICH's 4 KiB broadcast on 2 ranks of an
EPYC VM ran most calls in 0.17-0.20 us and stalled 4.2-4.7 us on more
than a tenth, a mean of 0.94-1.37 us against shm's 0.33-0.35). A
contender that failed is listed as failed. Exits 0 either way: this is a benchmark, not a test."""
import json
import os
import statistics
import sys


def load(path):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    runs, failed = {}, {}
    for r in rows:
        if r.get("failed"):
            failed.setdefault((r["world"], r["impl"]), r.get("why", "exited with an error"))
            continue
        impl = r["impl"].removeprefix("capi-")
        runs.setdefault((r["world"], r["bytes"], impl), []).append(r)
    def mean(v):  # median over the rounds of each round's mean; None where a contender printed none
        means = [x["mean_us"] for x in v if "mean_us" in x]
        return statistics.median(means) if means else None
    med = {k: (statistics.median(x["p50_us"] for x in v), statistics.median(x["p90_us"] for x in v), len(v), mean(v))
           for k, v in runs.items()}
    return med, failed


def fmt_size(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"


def main(path):
    med, failed = load(path)
    worlds = sorted({w for w, _, _ in med} | {w for w, _ in failed})
    for world in worlds:
        impls = sorted({i for w, _, i in med if w == world}, key=lambda i: ["shm", "mpich", "gloo"].index(i)
                       if i in ("shm", "mpich", "gloo") else 9)
        print(f"== {os.environ.get('BENCH_OP', 'allreduce')} float32, {world} ranks on one host: "
              "p50 / p90 in us (median of rounds) ==")
        head = f"{'size':>8} " + " ".join(f"{i + ' p50':>11} {i + ' p90':>11}" for i in impls)
        print(head + f" {'shm/mpich':>10} {'gloo/shm':>9}  flags")
        slower = tails = 0
        for size in sorted({b for w, b, _ in med if w == world}):
            cells, row = [], {i: med.get((world, size, i)) for i in impls}
            for i in impls:
                v = row[i]
                cells.append(f"{v[0]:>11.1f} {v[1]:>11.1f}" if v else f"{'-':>11} {'-':>11}")
            shm, mpich, gloo = row.get("shm"), row.get("mpich"), row.get("gloo")
            r_mpi = f"{shm[0] / mpich[0]:>10.2f}" if shm and mpich else f"{'-':>10}"
            r_gloo = f"{gloo[0] / shm[0]:>9.2f}" if shm and gloo else f"{'-':>9}"
            flags = []
            if shm and mpich and shm[0] > mpich[0]:
                means = f" (means {shm[3]:.2f} / {mpich[3]:.2f} us)" if shm[3] is not None and mpich[3] is not None else ""
                flags.append("slower than MPICH" + means)
                slower += 1
            if shm and shm[1] > 1.5 * shm[0]:
                flags.append("p90 > 1.5x p50")
                tails += 1
            print(f"{fmt_size(size):>8} " + " ".join(cells) + f" {r_mpi} {r_gloo}  {', '.join(flags)}")
        for (w, impl), why in sorted(failed.items()):
            if w == world:
                print(f"  {impl}: FAILED ({why})")
        print(f"  sizes where shm's p50 exceeds MPICH's: {slower}; where shm's p90 exceeds 1.5x its p50: {tails}")
        print()


if __name__ == "__main__":
    main(sys.argv[1])
