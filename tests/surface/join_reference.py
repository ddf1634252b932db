"""join_job.c's run in PyTorch DDP from the same wheel, on one rank of 2
(RANK, WORLD_SIZE, TORCH_PORT): the same model, rows, loss and optimizer
inside torch.distributed.algorithms.Join with divide_by_initial_world_size
from JOIN_DIVIDE (default 1). Prints the lines join_job prints.
    join_reference.py MODEL (gen.pt or norm.pt)"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import N, REAL, make_data, make_gan, make_latent, make_norm_net  # noqa: E402

PER_RANK = 8
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank, world_size=world)
torch.set_num_threads(1)
x, z_all = make_data()[0], make_latent()
model = make_gan()[0] if sys.argv[1] == "gen.pt" else make_norm_net()
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
batches = 6 if rank == 0 else 4
with Join([ddp], divide_by_initial_world_size=os.environ.get("JOIN_DIVIDE", "1") == "1"):
    for step in range(batches):
        rows = torch.tensor([(step * 2 * PER_RANK + rank * PER_RANK + i) % N for i in range(PER_RANK)])
        loss = F.mse_loss(ddp(z_all[rows]), x[rows, :REAL].contiguous())
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"rank {rank} step {step} loss {float(loss.item()).hex()}")
total = 0.0
for t in model.state_dict().values():
    if t.dtype == torch.float32:
        total += t.sum().item()
print(f"rank {rank} joined state {float(total).hex()}")
sys.stdout.flush()
os._exit(0)  # without finalization (see surface_reference.py)
