"""libddp's bucket assignment against PyTorch's own
torch.distributed._compute_bucket_assignment_by_size, from the same wheel:
the reducer assigns gradients in reverse registration order with the caps
[first_bucket_mb, bucket_cap_mb], as DDP's bucket rebuild does."""
import ctypes

import pytest
import torch
import torch.distributed as dist

from ddp_ctypes import Lib, ReducerOptions

MB = 1024 * 1024


@pytest.fixture(scope="module")
def lib_and_group():
    lib = Lib()
    g = lib.group(0, 1, 0)
    yield lib, g
    lib.lib.ddp_group_free(g)


def libddp_buckets(lib, g, tensors, first_mb, cap_mb):
    L = lib.lib
    red, handles = lib.reducer(g, None, tensors, broadcast=False, first_mb=first_mb, cap_mb=cap_mb)
    buckets = []
    for b in range(L.ddp_reducer_bucket_count(red)):
        count = ctypes.c_size_t()
        lib.check(L.ddp_reducer_bucket_indices(red, b, None, 0, ctypes.byref(count)), "indices")
        out = (ctypes.c_size_t * count.value)()
        lib.check(L.ddp_reducer_bucket_indices(red, b, out, count.value, ctypes.byref(count)), "indices")
        buckets.append(list(out))
    L.ddp_reducer_free(red)
    for h in handles:
        L.ddp_tensor_free(h)
    return buckets


CASES = {
    "many small": [torch.zeros(1000) for _ in range(600)],
    "mixed sizes": [torch.zeros(n) for n in (300000, 5, 70000, 262144, 1, 1000, 500000, 17, 8 * 262144, 3)],
    "one huge": [torch.zeros(10), torch.zeros(30 * 262144), torch.zeros(10)],
    "dtypes": [torch.zeros(200000, dtype=d) for d in (torch.float32, torch.float64, torch.float16) * 8],
    "exact limits": [torch.zeros(262144), torch.zeros(262144 * 25), torch.zeros(1), torch.zeros(262144 * 25)],
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("first_mb,cap_mb", [(1, 25), (0.25, 1), (5, 5)])
def test_buckets_match_pytorch(lib_and_group, name, first_mb, cap_mb):
    lib, g = lib_and_group
    tensors = CASES[name]
    # As DDP's bucket rebuild calls it: the tensors in the order they became
    # ready (here: reverse registration order) with their original indices.
    reverse = list(range(len(tensors)))[::-1]
    want, _ = dist._compute_bucket_assignment_by_size(
        tensors[::-1], [int(first_mb * MB), int(cap_mb * MB)], [False] * len(tensors), reverse)
    got = libddp_buckets(lib, g, tensors, first_mb, cap_mb)
    if len({t.dtype for t in tensors}) > 1:
        # PyTorch emits the last open bucket of each dtype in hash-map order.
        want, got = sorted(map(list, want)), sorted(got)
    assert got == [list(b) for b in want]
