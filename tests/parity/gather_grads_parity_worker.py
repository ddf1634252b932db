"""One rank of the all_gather(sync_grads) parity run, on PyTorch's side:
the inputs and targets of tests/torch/torch_worker.cpp's gather_grads mode
(the same generators), gathered with torch.distributed.nn.functional.all_gather
(gloo), the same MSE loss over the whole gathered batch, backward; writes
this rank's input gradient as raw float32 to $OUT/rank<r>.f32."""
import os

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dnn
import torch.nn.functional as F

from ddp_ctypes import exit_now

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.set_num_threads(1)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                        world_size=world)
x = torch.randn(3, 4, generator=torch.Generator().manual_seed(10 + rank)).requires_grad_(True)
target = torch.randn(world, 3, 4, generator=torch.Generator().manual_seed(50 + rank))
gathered = torch.stack(dnn.all_gather(x))
F.mse_loss(gathered, target).backward()
x.grad.contiguous().numpy().tofile(os.path.join(os.environ["OUT"], f"rank{rank}.f32"))
dist.destroy_process_group()
exit_now(0)
