"""native_job.cpp's run in PyTorch DDP from the same wheel, on one rank of 2
(RANK, WORLD_SIZE, TORCH_PORT): NormNet from the same state dict, the same
rows, loss and SGD, autocast for "bf16-mixed". Prints the lines native_job
prints; rank 0 writes the final state_dict to OUT/native_ref.pt.
    native_reference.py OUT [PRECISION]"""
import contextlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import N, REAL, NormNet, make_data, make_latent  # noqa: E402

PER_RANK = 8
out_dir = sys.argv[1]
precision = sys.argv[2] if len(sys.argv) > 2 else "32-true"
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank, world_size=world)
torch.set_num_threads(1)
x, z_all = make_data()[0], make_latent()
model = NormNet()
model.load_state_dict(torch.load(os.path.join(out_dir, "norm_state.pt"), weights_only=True))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
for step in range(10):
    rows = torch.tensor([(step * 2 * PER_RANK + rank * PER_RANK + i) % N for i in range(PER_RANK)])
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext())
    with autocast:
        out = ddp(z_all[rows])
    loss = F.mse_loss(out.float(), x[rows, :REAL].contiguous())
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step} loss {float(loss.item()).hex()}")
stats = 0.0
for t in model.buffers():
    if t.is_floating_point():
        stats += t.sum().item()
print(f"rank {rank} buffers {float(stats).hex()}")
if rank == 0:
    torch.save(model.state_dict(), os.path.join(out_dir, "native_ref.pt"))
sys.stdout.flush()
os._exit(0)  # without finalization (see surface_reference.py)
