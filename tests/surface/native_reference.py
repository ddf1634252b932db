"""native_job.cpp's run in PyTorch DDP from the same wheel, on one rank of 2
(RANK, WORLD_SIZE, TORCH_PORT): NormNet from the same state dict, the same
rows, loss and SGD, autocast for "bf16-mixed". Prints the lines native_job
prints. Uninterrupted: steps 0-19, with the running statistics' line after
step 9 and after step 19; after step 9, rank 0 writes the model's
state_dict to OUT/native_ref.pt, the optimizer's to OUT/native_ref_opt.pt,
and both as a Lightning-layout checkpoint to OUT/native_py.ckpt. With
--resume CKPT (one native_job wrote), it loads the model and the optimizer
from it and runs the 10 steps after its global_step.
    native_reference.py OUT [PRECISION] [--resume CKPT]"""
import contextlib
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from surface_model import N, REAL, NormNet, make_data, make_latent  # noqa: E402

PER_RANK = 8
args = sys.argv[1:]
resume = None
if "--resume" in args:
    i = args.index("--resume")
    resume = args[i + 1]
    del args[i:i + 2]
out_dir = args[0]
precision = args[1] if len(args) > 1 else "32-true"
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank, world_size=world)
torch.set_num_threads(1)
x, z_all = make_data()[0], make_latent()
model = NormNet()
model.load_state_dict(torch.load(os.path.join(out_dir, "norm_state.pt"), weights_only=True))
opt_state, first = None, 0
if resume:
    ckpt = torch.load(resume, weights_only=True)
    model.load_state_dict({k[len("model."):]: v for k, v in ckpt["state_dict"].items()})
    opt_state, first = ckpt["optimizer_states"][0], ckpt["global_step"]
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
if opt_state is not None:
    opt.load_state_dict(opt_state)


def buffers_line():
    stats = 0.0
    for t in model.buffers():
        if t.is_floating_point():
            stats += t.sum().item()
    print(f"rank {rank} buffers {float(stats).hex()}")


for step in range(first, first + (10 if resume else 20)):
    rows = torch.tensor([(step * 2 * PER_RANK + rank * PER_RANK + i) % N for i in range(PER_RANK)])
    autocast = (torch.autocast("cpu", dtype=torch.bfloat16) if precision == "bf16-mixed" else contextlib.nullcontext())
    with autocast:
        out = ddp(z_all[rows])
    loss = F.mse_loss(out.float(), x[rows, :REAL].contiguous())
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {rank} step {step} loss {float(loss.item()).hex()}")
    if step == 9 and not resume:
        buffers_line()
        if rank == 0:
            torch.save(model.state_dict(), os.path.join(out_dir, "native_ref.pt"))
            torch.save(opt.state_dict(), os.path.join(out_dir, "native_ref_opt.pt"))
            torch.save({"epoch": 0, "global_step": 10,
                        "state_dict": {"model." + k: v for k, v in model.state_dict().items()},
                        "optimizer_states": [opt.state_dict()], "lr_schedulers": []},
                       os.path.join(out_dir, "native_py.ckpt"))
buffers_line()
sys.stdout.flush()
os._exit(0)  # without finalization (see surface_reference.py)
