"""gan_job.c's run in PyTorch DDP from the same wheel, on one rank of 2
(RANK, WORLD_SIZE, TORCH_PORT): the generator and the discriminator each
in its own DistributedDataParallel over Gloo, the same rows, losses and
order. Prints the lines gan_job prints; rank 0 writes the final states to
OUT/ref_gan.pt.
    gan_reference.py STEPS OUT"""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import LATENT, N, REAL, make_data, make_gan, make_latent  # noqa: E402

PER_RANK = 8
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 10
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank, world_size=world)
torch.set_num_threads(1)
x, z_all = make_data()[0], make_latent()
gen, disc = make_gan()
gen_ddp, disc_ddp = torch.nn.parallel.DistributedDataParallel(gen), torch.nn.parallel.DistributedDataParallel(disc)
opt_g = torch.optim.SGD(gen_ddp.parameters(), lr=0.05, momentum=0.9)
opt_d = torch.optim.SGD(disc_ddp.parameters(), lr=0.02)
ones, zeros = torch.ones(PER_RANK, 1), torch.zeros(PER_RANK, 1)
for step in range(steps):
    rows = torch.tensor([(step * 2 * PER_RANK + rank * PER_RANK + i) % N for i in range(PER_RANK)])
    real, z = x[rows, :REAL].contiguous(), z_all[rows]
    fake = gen_ddp(z)
    g_loss = F.binary_cross_entropy_with_logits(disc_ddp(fake), ones)
    opt_g.zero_grad()
    g_loss.backward()
    opt_g.step()
    d_loss = (F.binary_cross_entropy_with_logits(disc_ddp(real), ones)
              + F.binary_cross_entropy_with_logits(disc_ddp(fake.detach()), zeros))
    opt_d.zero_grad()
    d_loss.backward()
    opt_d.step()
    print(f"rank {rank} gan {step} g_loss {float(g_loss.item()).hex()}")
    print(f"rank {rank} gan {step} d_loss {float(d_loss.item()).hex()}")
if rank == 0 and len(sys.argv) > 2:
    torch.save({"generator": gen.state_dict(), "discriminator": disc.state_dict(), "opt_g": opt_g.state_dict(),
                "opt_d": opt_d.state_dict()}, os.path.join(sys.argv[2], "ref_gan.pt"))
sys.stdout.flush()
os._exit(0)  # without finalization (see surface_reference.py)
