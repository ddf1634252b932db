"""The peer of bench_checkpoint.cpp: the same state (100 M float32 parameters
in ten tensors, Adam's state after one step) saved with torch.save in
Lightning's layout and loaded with torch.load(weights_only=True), then
optimizer.load_state_dict and the parameters copied in. --fsync also fsyncs
the file, as libddp's atomic save does. Prints the same lines.
    bench_checkpoint_torch.py PATH [parameters] [--fsync]"""
import os
import sys
import time

import torch


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1])
    return -1


def phase(name, body):
    import threading

    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status_kb("VmRSS:")
    anon_before = status_kb("RssAnon:")
    peak = [anon_before]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], status_kb("RssAnon:"))
            time.sleep(0.001)

    t = threading.Thread(target=sample)
    t.start()
    t0 = time.monotonic()
    body()
    s = time.monotonic() - t0
    done.set()
    t.join()
    print(f"{name} {s:.3f} s, peak +{(status_kb('VmHWM:') - before) / 1024:.1f} MB, "
          f"anon +{(peak[0] - anon_before) / 1024:.1f} MB", flush=True)


def main():
    path = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 and not sys.argv[2].startswith("--") else 100_000_000
    fsync = "--fsync" in sys.argv
    torch.set_num_threads(1)
    params = [torch.nn.Parameter(torch.randn(total // 10)) for _ in range(10)]
    opt = torch.optim.Adam(params)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()

    def save():
        c = {"epoch": 1, "global_step": 1,
             "state_dict": {f"layer{i}.weight": p.detach() for i, p in enumerate(params)},
             "optimizer_states": [opt.state_dict()]}
        with open(path, "wb") as f:
            torch.save(c, f)
            if fsync:
                f.flush()
                os.fsync(f.fileno())

    def load():
        c = torch.load(path, weights_only=True)
        opt.load_state_dict(c["optimizer_states"][0])
        with torch.no_grad():
            for i, p in enumerate(params):
                p.copy_(c["state_dict"][f"layer{i}.weight"])

    phase("save", save)
    phase("load", load)


if __name__ == "__main__":
    main()
