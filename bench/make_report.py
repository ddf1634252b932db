"""Writes bench/results/REPORT.md and its PNG plots from what scripts/bench.sh
left in bench/results/raw/: status.tsv (every section: ok, failed or
skipped), machine.json, allreduce.jsonl, ddp_step.jsonl and each section's
printed output. Every figure is from this one invocation; every comparison
is a ratio of two contenders measured in it, alternating.
   python bench/make_report.py bench/results <quick|full> <seconds taken>"""
import datetime
import json
import os
import statistics
import sys

NAMES = {"shm": "libddp shm", "gloo": "libddp gloo", "c10d": "raw c10d Gloo", "torch.distributed": "torch.distributed",
         "mpich": "MPICH"}
ORDER = ["shm", "gloo", "c10d", "torch.distributed", "mpich"]


def read_jsonl(path):
    if not os.path.exists(path):
        return []
    return [json.loads(l) for l in open(path) if l.startswith("{")]


def size_label(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n:
            return f"{b // n} {unit}"
    return f"{b} B"


def allreduce_tables(rows, machine):
    """Per world: {bytes: {impl: (p10, p50, p90, rounds)}}, and the failed contenders."""
    runs, failed = {}, {}
    for r in rows:
        if r.get("failed"):
            failed.setdefault(r["world"], {})[r["impl"].removeprefix("capi-")] = r.get("why", "exited with an error")
            continue
        impl = r["impl"].removeprefix("capi-")
        runs.setdefault(r["world"], {}).setdefault(r["bytes"], {}).setdefault(impl, []).append(r)
    out = {}
    for world, by_size in runs.items():
        out[world] = {}
        for size, by_impl in by_size.items():
            out[world][size] = {
                impl: tuple(statistics.median(x.get(k, x["p50_us"]) for x in rs) for k in ("p10_us", "p50_us", "p90_us"))
                + (len(rs),) for impl, rs in by_impl.items()}
    return out, failed


def busbw(size, us, world):
    return size / (us * 1e-6) / 1e9 * 2 * (world - 1) / world


def plot_allreduce(tables, results, plots):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed in .venv: no plots"
    for world, by_size in sorted(tables.items()):
        sizes = sorted(by_size)
        for kind in ("latency", "busbw"):
            fig, ax = plt.subplots(figsize=(7, 4.2))
            for impl in ORDER:
                xs = [s for s in sizes if impl in by_size[s]]
                if not xs:
                    continue
                if kind == "latency":
                    ys = [by_size[s][impl][1] for s in xs]
                    lo = [by_size[s][impl][1] - by_size[s][impl][0] for s in xs]
                    hi = [by_size[s][impl][2] - by_size[s][impl][1] for s in xs]
                    ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", ms=3, capsize=2, label=NAMES.get(impl, impl))
                else:
                    ax.plot(xs, [busbw(s, by_size[s][impl][1], world) for s in xs], marker="o", ms=3,
                            label=NAMES.get(impl, impl))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("p50 latency (us), bars p10-p90" if kind == "latency" else "bus bandwidth (GB/s)")
            ax.set_title(f"all_reduce float32, {world} ranks on one host")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
            name = f"allreduce_{kind}_{world}ranks.png"
            fig.tight_layout()
            fig.savefig(os.path.join(results, name), dpi=110)
            plt.close(fig)
            plots.append(name)
    return ""


def plot_bars(results, name, title, labels, values, unit, plots):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(labels) + 1.2))
    ax.barh(labels, values)
    ax.invert_yaxis()
    ax.set_xlabel(unit)
    ax.set_title(title)
    for i, v in enumerate(values):
        ax.text(v, i, f" {v:.1f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(results, name), dpi=110)
    plt.close(fig)
    plots.append(name)


def main(results, mode, seconds):
    raw = os.path.join(results, "raw")
    status = [l.rstrip("\n").split("\t") for l in open(os.path.join(raw, "status.tsv")) if l.strip()]
    machine = json.load(open(os.path.join(raw, "machine.json"))) if os.path.exists(os.path.join(raw, "machine.json")) else {}
    plots, md, headline = [], [], []
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    md.append(f"# libddp benchmark report\n\n`scripts/bench.sh{' --quick' if mode == 'quick' else ''}`, {when}, "
              f"{seconds} s. Every figure below is from this one invocation; contenders ran alternately, one "
              f"process group per process, each timed the same way; a ratio compares two contenders of this run.\n")
    md.append("## Machine\n")
    if machine:
        md.append("| | |\n|---|---|")
        for k, v in machine.items():
            md.append(f"| {k} | {v:.2f} |" if isinstance(v, float) else f"| {k} | {v} |")
        md.append("")
    else:
        md.append("machine_info failed: see the sections table.\n")
    md.append("## Sections\n\n| section | result | seconds |\n|---|---|---|")
    for name, result, secs in status:
        md.append(f"| {name} | {result} | {secs} |")
    md.append("")

    # all_reduce
    tables, failed = allreduce_tables(read_jsonl(os.path.join(raw, "allreduce.jsonl")), machine)
    note = plot_allreduce(tables, results, plots) if tables else ""
    memcpy, loopback = machine.get("memcpy_GBps"), machine.get("loopback_GBps")
    for world, by_size in sorted(tables.items()):
        impls = [i for i in ORDER if any(i in v for v in by_size.values())]
        md.append(f"## all_reduce, float32, {world} ranks on one host\n")
        md.append("p50 in us (median over rounds of each round's p50; p10-p90 in the plot). Ratios are p50 over p50; "
                  "bus bandwidth is size / time x 2(n-1)/n, as a fraction of this machine's memcpy (shm) and "
                  "loopback TCP (Gloo) bandwidth.\n")
        head = "| size | " + " | ".join(NAMES.get(i, i) for i in impls) + \
               " | shm / MPICH | shm / torch.distributed | shm p90/p50 | shm busbw / memcpy | gloo busbw / loopback |"
        md.append(head)
        md.append("|" + "---|" * (head.count("|") - 1))
        worst_mpi, best_mpi, slower = 0.0, 1e9, []
        for size in sorted(by_size):
            row = by_size[size]
            cells = [f"{row[i][1]:.1f}" if i in row else "-" for i in impls]
            shm, mpi, tor, glo = row.get("shm"), row.get("mpich"), row.get("torch.distributed"), row.get("gloo")
            r_mpi = f"{shm[1] / mpi[1]:.2f}" if shm and mpi else "-"
            if shm and mpi:
                worst_mpi, best_mpi = max(worst_mpi, shm[1] / mpi[1]), min(best_mpi, shm[1] / mpi[1])
                if shm[1] > mpi[1]:
                    slower.append(size_label(size))
            r_tor = f"{shm[1] / tor[1]:.3f}" if shm and tor else "-"
            tail = f"{shm[2] / shm[1]:.2f}" if shm else "-"
            f_mem = f"{busbw(size, shm[1], world) / memcpy:.2f}" if shm and memcpy else "-"
            f_lo = f"{busbw(size, glo[1], world) / loopback:.3f}" if glo and loopback else "-"
            md.append(f"| {size_label(size)} | " + " | ".join(cells) + f" | {r_mpi} | {r_tor} | {tail} | {f_mem} | {f_lo} |")
        for impl, why in sorted(failed.get(world, {}).items()):
            md.append(f"\n**{NAMES.get(impl, impl)}: FAILED** ({why})")
        md.append("")
        if worst_mpi:
            headline.append(f"all_reduce, {world} ranks: libddp shm / MPICH p50 = {best_mpi:.2f}-{worst_mpi:.2f} over "
                            f"4 B-{size_label(max(by_size))}" + (f"; slower than MPICH at {', '.join(slower)}" if slower
                                                                   else "; at most MPICH's at every size"))
        m16 = by_size.get(16 << 20, {})
        if "shm" in m16 and "torch.distributed" in m16:
            headline.append(f"all_reduce 16 MiB, {world} ranks: torch.distributed (gloo) / libddp shm = "
                            f"{m16['torch.distributed'][1] / m16['shm'][1]:.1f}x")
        for kind in ("latency", "busbw"):
            name = f"allreduce_{kind}_{world}ranks.png"
            if name in plots:
                md.append(f"![all_reduce {kind}, {world} ranks]({name})\n")
    if note:
        md.append(f"_{note}_\n")

    # DDP step
    steps = read_jsonl(os.path.join(raw, "ddp_step.jsonl"))
    if steps:
        md.append("## DDP step, 2 ranks, 25 MB buckets\n\n| model | implementation | mode | p50 ms | p90 ms |\n|---|---|---|---|---|")
        # A paired row's kind was timed in turn with the others in one process (bench_ddp_step paired).
        kind = lambda r: r.get("mode", "") + (" (paired)" if r.get("paired") else "")
        for r in steps:
            md.append(f"| {r['model']} | {r['impl']} | {kind(r)} | {r['step_ms_p50']:.1f} | {r['step_ms_p90']:.1f} |")
        md.append("")
        get = lambda impl, model, m="overlap": next((r["step_ms_p50"] for r in steps if r["impl"] == impl and
                                                     r["model"] == model and r.get("mode", "overlap") == m
                                                     and not r.get("paired")), None)
        for model in sorted({r["model"] for r in steps}):
            lib, ddp, pl = get("libddp-c++", model), get("pytorch-ddp", model), get("lightning-trainer", model)
            parts = []
            if lib and ddp:
                parts.append(f"PyTorch DDP / libddp = {ddp / lib:.2f}x")
            if lib and pl:
                parts.append(f"Lightning / libddp = {pl / lib:.2f}x")
            if parts:
                headline.append(f"DDP step ({model}): " + ", ".join(parts))
            # With gradient_as_bucket_view on both sides (libddp's shm keeps those buckets in shared memory).
            vlib = next((r["step_ms_p50"] for r in steps if r["impl"] == "libddp-c++-grad-view" and
                         r["model"] == model and r.get("mode") == "overlap"), None)
            vddp = get("pytorch-ddp-grad-view", model)
            if vlib and vddp:
                headline.append(f"DDP step ({model}, gradient_as_bucket_view): PyTorch DDP / libddp = {vddp / vlib:.2f}x")
            labels = [f"{r['impl']} {kind(r)}" for r in steps if r["model"] == model]
            values = [r["step_ms_p50"] for r in steps if r["model"] == model]
            plot_bars(results, f"ddp_step_{model}.png", f"DDP step, {model}, 2 ranks (p50)", labels, values, "ms", plots)
            if f"ddp_step_{model}.png" in plots:
                md.append(f"![DDP step {model}](ddp_step_{model}.png)\n")

    # Launch: the launcher's own cost
    lx = os.path.join(raw, "launch_exit.txt")
    if os.path.exists(lx):
        text = open(lx).read()
        for line in text.splitlines():
            if line.startswith("ddprun / alone:"):
                headline.append("launcher's own cost: " + line.split("(")[0].strip() + " (target at most 1.1)")
            if line.startswith("torchrun / ddprun:"):
                headline.append("launch: " + line.split("(")[0].strip())

    # Every section's own printed table, as it printed it.
    for name, result, _ in status:
        path = os.path.join(raw, f"{name}.txt")
        if not os.path.exists(path) or name == "machine":
            continue
        text = open(path).read().rstrip()
        if not result.startswith("ok"):
            text = "\n".join(text.splitlines()[-15:])
        md.append(f"## {name}: {result}\n\n```\n{text}\n```\n")

    top = ["## Headline ratios\n"] + [f"- {h}" for h in headline] + [""]
    md[1:1] = top
    with open(os.path.join(results, "REPORT.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(top))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
