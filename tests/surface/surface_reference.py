"""surface_job.c's run in PyTorch DDP and Lightning, from the same wheel, on
one rank of 2 (RANK, WORLD_SIZE, TORCH_PORT in the environment): DDP over
Gloo, lightning_fabric's seed_everything(42) after DDP is made, the same
batches and the same composite loss with torch.nn.functional, SGD in the
same two parameter groups (written out with torch.save to OUT/ref_optimizer.pt
by rank 0); evaluation
under torch.no_grad with the module itself (each rank its own buffers, no
collective, as libddp's), and the evaluation loss logged through Lightning's
own _ResultCollection with sync_dist=True. Prints the lines surface_job
prints."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning_fabric.utilities.distributed import _sync_ddp_if_available
from lightning_fabric.utilities.seed import seed_everything
from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler
from pytorch_lightning.trainer.connectors.logger_connector.result import _ResultCollection

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import N, make_data, make_model  # noqa: E402

BATCH, EVAL_ROWS = 16, 9
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 12
out_dir = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
bench = len(sys.argv) > 3 and sys.argv[3] == "bench"  # bench/run_surface_step.sh: step times only
WARMUP = 20
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank, world_size=world)
torch.set_num_threads(1)

x, s, y, r = make_data()
model = make_model()
ddp = torch.nn.parallel.DistributedDataParallel(model)
no_decay = [n.endswith(".bias") or n.startswith("norm.") for n, _ in model.named_parameters()]
params = [p for _, p in model.named_parameters()]
opt = torch.optim.SGD([{"params": [p for p, nd in zip(params, no_decay) if not nd]},
                       {"params": [p for p, nd in zip(params, no_decay) if nd], "weight_decay": 0.0, "lr": 0.08}],
                      lr=0.05, momentum=0.9, weight_decay=1e-4)
seed_everything(42, verbose=False)
weight = torch.tensor([1.0, 2.0, 0.5])
per_rank = BATCH // world


def class_loss(logits, target):
    return F.cross_entropy(logits, target, weight=weight, ignore_index=-100, label_smoothing=0.1)


for step in range(steps):
    if step == WARMUP:
        started = time.perf_counter()
    rows = torch.tensor([(step * BATCH + rank * per_rank + i) % N for i in range(per_rank)])
    out = ddp(x[rows], s[rows])
    loss = class_loss(out["logits"], y[rows]) + 0.1 * F.mse_loss(out["reg"], r[rows])
    opt.zero_grad()
    loss.backward()
    opt.step()
    v = loss.item()
    if not bench:
        print(f"rank {rank} step {step} loss {float(v).hex()}")

if bench:
    if steps > WARMUP:
        print(f"rank {rank} step_ms {(time.perf_counter() - started) * 1e3 / (steps - WARMUP):.4f}")
    sys.stdout.flush()
    os._exit(0)

model.eval()


class Rows(torch.utils.data.Dataset):
    def __len__(self):
        return EVAL_ROWS

    def __getitem__(self, i):
        return i


idx = list(UnrepeatedDistributedSampler(Rows(), num_replicas=world, rank=rank, shuffle=False))
eval_batch = 2 if rank == 0 else 4
results = _ResultCollection(training=False)
with torch.no_grad():
    for b, at in enumerate(range(0, len(idx), eval_batch)):
        if b >= (3 if rank == 0 else 1):
            break
        rows = torch.tensor(idx[at:at + eval_batch])
        target = y[rows].clamp(min=0)
        out = model(x[rows], s[rows])
        v = class_loss(out["logits"], target)
        e = model.embed(x[rows]).sum()
        print(f"rank {rank} eval {b} loss {float(v.item()).hex()}")
        print(f"rank {rank} eval {b} embed {float(e.item()).hex()}")
        # What self.log("val_loss", v, on_epoch=True, sync_dist=True, batch_size=n) does in validation_step.
        for name, sync in (("local", False), ("sync_dist", True)):
            results.log("validation_step", name, v, on_step=False, on_epoch=True, sync_dist=sync,
                        sync_dist_fn=_sync_ddp_if_available, batch_size=len(rows))
for name in ("local", "sync_dist"):
    value = results[f"validation_step.{name}"].compute()
    print(f"rank {rank} metric {name} {float(value.item()).hex()}")
if out_dir and rank == 0:
    torch.save(opt.state_dict(), os.path.join(out_dir, "ref_optimizer.pt"))
sys.stdout.flush()
# Without interpreter finalization: destroying torch's process groups there
# can abort the process (see tests/parity/ddp_ctypes.py's exit_now).
os._exit(0)
