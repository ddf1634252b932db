"""PowerSGD in libddp against PyTorch's own powerSGD_hook /
batched_powerSGD_hook (same wheel), 2 real processes.

Both sides reduce the same buckets: libddp's reducer (caller-owned gradient
buffers) decides the buckets, and the PyTorch hook is called on GradBucket
stand-ins holding the same gradients in the same order. Over several steps
(plain all-reduce, then compression with error feedback and warm start),
every reduced gradient must agree to 1e-5, and the compression statistics
must be equal. VARIANT selects the options."""
import ctypes
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as default
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as ps

from ddp_ctypes import CompressionStats, Lib, exit_now
from grad_bucket import GradBucket

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
variant = os.environ.get("VARIANT", "plain")
torch.manual_seed(0)
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['TORCH_PORT']}", rank=rank,
                        world_size=world)
lib = Lib()
group = lib.group(rank, world, int(os.environ["DDP_PORT"]))

# Options as PyTorch's PowerSGDState takes them; the variants change a few.
opts = dict(matrix_approximation_rank=1, start_powerSGD_iter=3, min_compression_rate=2, use_error_feedback=True,
            warm_start=True, orthogonalization_epsilon=0, random_seed=0, batch_tensors_with_same_shape=False)
batched, wrap = False, False
if variant == "rank2":
    opts.update(matrix_approximation_rank=2, random_seed=1234)
elif variant == "rank4_qr":  # rank > 2 orthogonalizes with QR
    opts.update(matrix_approximation_rank=4)
elif variant == "no_feedback":
    opts.update(use_error_feedback=False, warm_start=False, start_powerSGD_iter=1)
elif variant == "same_shape_batches":
    opts.update(batch_tensors_with_same_shape=True, matrix_approximation_rank=2)
elif variant == "epsilon":
    opts.update(orthogonalization_epsilon=1e-8, min_compression_rate=0.5)
elif variant == "batched":
    batched = True
elif variant == "fp16_wrap":
    wrap = True

# Gradient shapes: linear and conv weights (conv: viewed as out x rest),
# biases (1-D: never compressed), a small square matrix that does not
# compress at rate 2, and same-shaped weights (batching).
shapes = [(48, 32), (48,), (32, 32), (32, 32), (16, 8, 3, 3), (16,), (4, 4), (10, 48), (10,), (32, 32)]
grads = [torch.zeros(s) for s in shapes]
reducer, keep = lib.reducer(group, None, grads, broadcast=False, first_mb=0.005, cap_mb=0.012)

L = lib.lib
vp = ctypes.c_void_p
o = lib.powersgd_options()
o.matrix_approximation_rank = opts["matrix_approximation_rank"]
o.start_powersgd_iter = opts["start_powerSGD_iter"]
o.min_compression_rate = opts["min_compression_rate"]
o.use_error_feedback = int(opts["use_error_feedback"])
o.warm_start = int(opts["warm_start"])
o.orthogonalization_epsilon = opts["orthogonalization_epsilon"]
o.random_seed = opts["random_seed"] + int(os.environ.get("SEED_SHIFT", "0"))  # negative control
o.batch_tensors_with_same_shape = int(opts["batch_tensors_with_same_shape"])
o.batched = int(batched)
hook = vp()
lib.check(L.ddp_comm_hook_powersgd(ctypes.byref(hook), ctypes.byref(o)), "powersgd")
stats_handle = hook
if wrap:
    wrapper = vp()
    lib.check(L.ddp_comm_hook_wrap_fp16(ctypes.byref(wrapper), hook), "wrap_fp16")
    stats_handle = wrapper
lib.check(L.ddp_reducer_set_comm_hook(reducer, stats_handle), "set_comm_hook")

# PyTorch's side: its hook on the same buckets.
state = ps.PowerSGDState(process_group=None, **opts)
torch_hook = ps.batched_powerSGD_hook if batched else ps.powerSGD_hook
if batched:
    # batched_powerSGD_hook passes 2-D matrices to _orthogonalize, which since
    # torch 2.x asserts a 3-D batch; give it the batch of one it expects.
    plain_orthogonalize = ps._orthogonalize
    ps._orthogonalize = lambda m, epsilon=0: plain_orthogonalize(m.unsqueeze(0) if m.dim() == 2 else m, epsilon)
if wrap:
    torch_hook = default.fp16_compress_wrapper(torch_hook)


buckets = lib.bucket_layout(reducer, len(shapes))
nb = len(buckets)
assert nb >= 3, f"want several buckets, got {buckets}"

tol = 2e-3 if wrap else 1e-5
failures = []
for step in range(8):
    gen = torch.Generator().manual_seed(1000 * step + rank)
    local = [torch.randn(s, generator=gen) for s in shapes]
    # libddp
    for g, v in zip(grads, local):
        g.copy_(v)
    lib.reduce_all(reducer, len(shapes))
    # PyTorch
    expected = [None] * len(shapes)
    for b, indices in enumerate(buckets):
        buffer = torch.cat([local[i].reshape(-1) for i in indices])
        out = torch_hook(state, GradBucket(buffer, b, b == nb - 1, [shapes[i] for i in indices])).wait()
        out = (out[0] if isinstance(out, list) else out).to(torch.float32)  # the reducer casts back
        at = 0
        for i in indices:
            expected[i] = out[at:at + grads[i].numel()].view(shapes[i]).clone()
            at += grads[i].numel()
    for i in range(len(shapes)):
        if not torch.allclose(grads[i], expected[i], rtol=tol, atol=tol):
            failures.append(f"step {step} grad {i} {tuple(shapes[i])}: max |diff| "
                            f"{(grads[i] - expected[i]).abs().max().item():.3g}")

s = CompressionStats()
lib.check(L.ddp_comm_hook_compression_stats(stats_handle, ctypes.byref(s)), "compression_stats")
rate, before, after = state.compression_stats()
if (s.numel_before, s.numel_after, s.iteration) != (before, after, state.iter):
    failures.append(f"stats: libddp {s.numel_before}/{s.numel_after} iter {s.iteration}, "
                    f"PyTorch {before}/{after} iter {state.iter}")
if not batched:
    # The statistics from the shapes alone: each compressed step counts every
    # element before, and (n + m) * r for a compressed n x m gradient after.
    def compressed_size(shape):
        if not shape:
            return None
        n = shape[0]
        m = 1
        for d in shape[1:]:
            m *= d
        r = min(n, m, opts["matrix_approximation_rank"])
        return (n + m) * r if (n + m) * r * opts["min_compression_rate"] < n * m else None

    steps = 8 - opts["start_powerSGD_iter"]
    numel = [g.numel() for g in grads]
    sizes = [compressed_size(s_) for s_ in shapes]
    want_before = steps * sum(numel)
    want_after = steps * sum(c if c is not None else k for c, k in zip(sizes, numel))
    if (s.numel_before, s.numel_after) != (want_before, want_after):
        failures.append(f"stats {s.numel_before}/{s.numel_after}, from the shapes {want_before}/{want_after}")
    nm = sum(k for c, k in zip(sizes, numel) if c is not None)
    compressed = sum(c for c in sizes if c is not None)
    print(f"[rank {rank}] compressed gradients: sum(n*m) / sum((n+m)*r) = {nm}/{compressed} = {nm / compressed:.3f}")
print(f"[rank {rank}] variant={variant} buckets={buckets} stats={s.numel_before}/{s.numel_after} "
      f"rate={rate:.3f} iter={s.iteration}, {len(failures)} mismatches")
for f in failures[:10]:
    print(f"[rank {rank}] MISMATCH {f}")
L.ddp_comm_hook_free(hook)
if wrap:
    L.ddp_comm_hook_free(wrapper)
L.ddp_reducer_free(reducer)
L.ddp_group_free(group)
dist.destroy_process_group()
exit_now(1 if failures else 0)
