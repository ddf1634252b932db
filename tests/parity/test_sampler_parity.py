"""libddp's sampler against torch.utils.data.DistributedSampler itself, from
the same wheel: the same indices for every rank, over dataset sizes (empty,
smaller than the world, exact multiples, remainders), world sizes, seeds
(negative ones too), epochs, shuffle and drop_last on and off; and the
unrepeated one against Lightning's UnrepeatedDistributedSampler (every
index exactly once over the ranks) on 200 configurations."""
import ctypes
import itertools

import pytest
from torch.utils.data import DistributedSampler

from ddp_ctypes import Lib

INVALID_ARGUMENT = -1


class SamplerOptions(ctypes.Structure):
    """Version 1 of ddp_sampler_options (a caller built before version 2 still works)."""
    _fields_ = [("version", ctypes.c_uint), ("shuffle", ctypes.c_int), ("seed", ctypes.c_int64),
                ("drop_last", ctypes.c_int)]


class SamplerOptions2(ctypes.Structure):
    _fields_ = SamplerOptions._fields_ + [("unrepeated", ctypes.c_int)]


@pytest.fixture(scope="module")
def lib():
    L = Lib().lib
    L.ddp_sampler_indices.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                      ctypes.POINTER(SamplerOptions), ctypes.POINTER(ctypes.c_int64),
                                      ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    L.ddp_sampler_num_samples.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    L.ddp_sampler_options_init.argtypes = [ctypes.POINTER(SamplerOptions), ctypes.c_uint]
    return L


def libddp_indices(L, n, world, rank, epoch, shuffle, seed, drop_last):
    o = SamplerOptions()
    assert L.ddp_sampler_options_init(ctypes.byref(o), 1) == 0
    o.shuffle, o.seed, o.drop_last = int(shuffle), seed, int(drop_last)
    count = ctypes.c_size_t()
    assert L.ddp_sampler_indices(n, world, rank, epoch, ctypes.byref(o), None, 0, ctypes.byref(count)) == 0
    out = (ctypes.c_int64 * max(count.value, 1))()
    assert L.ddp_sampler_indices(n, world, rank, epoch, ctypes.byref(o), out, count.value, ctypes.byref(count)) == 0
    num = ctypes.c_int64()
    assert L.ddp_sampler_num_samples(n, world, int(drop_last), ctypes.byref(num)) == 0
    assert num.value == count.value
    return list(out)[: count.value]


def torch_indices(n, world, rank, epoch, shuffle, seed, drop_last):
    s = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed, drop_last=drop_last)
    s.set_epoch(epoch)
    return list(s)


SIZES = [0, 1, 2, 3, 7, 8, 10, 97, 100, 1797]
WORLDS = [1, 2, 3, 4, 8]
SEEDS = [0, 42, 2**40 + 3, -5]


@pytest.mark.parametrize("n,world", list(itertools.product(SIZES, WORLDS)))
def test_every_rank_gets_what_distributed_sampler_gives(lib, n, world):
    for shuffle, drop_last, seed, epoch in itertools.product([True, False], [False, True], SEEDS, [0, 1, 7]):
        if not shuffle and (seed, epoch) != (0, 0):
            continue  # without shuffle, seed and epoch change nothing
        for rank in range(world):
            want = torch_indices(n, world, rank, epoch, shuffle, seed, drop_last)
            got = libddp_indices(lib, n, world, rank, epoch, shuffle, seed, drop_last)
            assert got == want, (n, world, rank, epoch, shuffle, seed, drop_last)


def test_a_short_buffer_gets_a_prefix_and_the_full_count(lib):
    o = SamplerOptions(1, 1, 3, 0)
    out = (ctypes.c_int64 * 4)()
    count = ctypes.c_size_t()
    assert lib.ddp_sampler_indices(100, 2, 1, 0, ctypes.byref(o), out, 4, ctypes.byref(count)) == 0
    assert count.value == 50
    assert list(out) == torch_indices(100, 2, 1, 0, True, 3, False)[:4]


INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("seed,epoch", [(INT64_MAX, INT64_MAX), (INT64_MAX, 1), (INT64_MAX, -INT64_MAX),
                                        (-(2**63), 0), (-1, -(2**63) + 1), (2**40 + 3, INT64_MAX)])
def test_seed_plus_epoch_past_int64_seeds_as_torch_does(lib, seed, epoch):
    # DistributedSampler adds them as Python ints; libddp's int64s overflow.
    # The low 32 bits pick the permutation, so the seeds 2^32 apart that a
    # wrong sum would give are told apart by the high ones only where torch
    # sees them: compare with torch itself.
    for n, world in ((10, 2), (97, 3)):
        for rank in range(world):
            want = torch_indices(n, world, rank, epoch, True, seed, False)
            assert libddp_indices(lib, n, world, rank, epoch, True, seed, False) == want, (seed, epoch, n, rank)


@pytest.mark.parametrize("seed,epoch", [(-(2**63), -1), (-5, -(2**63)), (-(2**63), -(2**63))])
def test_seed_plus_epoch_below_int64_is_refused_as_torch_refuses_it(lib, seed, epoch):
    with pytest.raises(ValueError):
        torch_indices(10, 2, 0, epoch, True, seed, False)
    o = SamplerOptions(1, 1, seed, 0)
    out = (ctypes.c_int64 * 5)()
    count = ctypes.c_size_t(123)
    for n in (10, 0):  # torch seeds an empty dataset's generator too
        assert lib.ddp_sampler_indices(n, 2, 0, epoch, ctypes.byref(o), out, 5, ctypes.byref(count)) == INVALID_ARGUMENT
        assert count.value == 0
        assert b"below -2^63" in lib.ddp_last_error_message()
    o.shuffle = 0  # without shuffle nothing is seeded
    assert lib.ddp_sampler_indices(10, 2, 0, epoch, ctypes.byref(o), out, 5, ctypes.byref(count)) == 0


@pytest.mark.parametrize("n,world,rank", [(-1, 2, 0), (10, 0, 0), (10, 2, 2), (10, 2, -1)])
def test_bad_arguments_are_refused(lib, n, world, rank):
    count = ctypes.c_size_t(123)
    assert lib.ddp_sampler_indices(n, world, rank, 0, None, None, 0, ctypes.byref(count)) == INVALID_ARGUMENT
    assert count.value == 0


def unrepeated_libddp(L, n, world, rank, epoch, shuffle, seed):
    L.ddp_sampler_indices.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_void_p,
                                      ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    o = SamplerOptions2(2, int(shuffle), seed, 1, 1)  # drop_last is ignored when unrepeated
    count = ctypes.c_size_t()
    out = (ctypes.c_int64 * max(n, 1))()
    try:
        assert L.ddp_sampler_indices(n, world, rank, epoch, ctypes.byref(o), out, n, ctypes.byref(count)) == 0
    finally:
        L.ddp_sampler_indices.argtypes = [ctypes.c_int64, ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                                          ctypes.POINTER(SamplerOptions), ctypes.POINTER(ctypes.c_int64),
                                          ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
    return list(out)[: count.value]


def unrepeated_lightning(n, world, rank, epoch, shuffle, seed):
    from pytorch_lightning.overrides.distributed import UnrepeatedDistributedSampler

    s = UnrepeatedDistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=shuffle, seed=seed)
    s.set_epoch(epoch)
    return list(s)


UNREPEATED = [(n, world, epoch, shuffle, seed)
              for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16, 33, 97, 100)
              for world in (1, 2, 3, 4, 8)
              for epoch, shuffle, seed in ((0, False, 0), (0, True, 0), (3, True, 42), (1, True, 7))
              if n >= world]  # Lightning asserts that every rank gets a sample


def test_unrepeated_equals_lightnings_on_200_configurations(lib):
    pytest.importorskip("pytorch_lightning")
    assert len(UNREPEATED) >= 200
    for n, world, epoch, shuffle, seed in UNREPEATED:
        seen = []
        for rank in range(world):
            got = unrepeated_libddp(lib, n, world, rank, epoch, shuffle, seed)
            assert got == unrepeated_lightning(n, world, rank, epoch, shuffle, seed), (n, world, rank, epoch, shuffle)
            seen += got
        assert sorted(seen) == list(range(n))  # every index exactly once
