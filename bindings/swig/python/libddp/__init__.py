"""libddp from Python: the C API through SWIG (module libddp.ddp), plus
glue for NumPy arrays, torch tensors (DLPack) and `with` blocks. Every
operation is one libddp call.

    import numpy as np, libddp
    with libddp.Group() as g:                  # the environment (torchrun, ...)
        x = np.ones(4, np.float32)
        g.all_reduce(libddp.wrap(x), libddp.SUM)   # in place, no copy

    t = torch.ones(4)                          # a torch tensor, shared both ways
    g.all_reduce(libddp.from_dlpack(t))        # t itself is reduced
    torch.from_dlpack(g.all_gather(libddp.from_dlpack(t)))   # a torch view of libddp's result

    s = libddp.strategy(devices=2, precision="bf16-mixed")   # DDPStrategy's keyword arguments
"""
import functools as _functools

from .ddp import *  # noqa: F401,F403
from .ddp import Tensor, Group, Reducer, CommHook, ModelAverager, Worker, Module, Optimizer, Strategy  # noqa: F401
from .ddp import LrScheduler, StrategyOptions, ReducerOptions, SgdOptions, AdamOptions, SamplerOptions  # noqa: F401
from .ddp import LrSchedulerOptions, CheckpointInfo, Work, Env  # noqa: F401
from .ddp import Outputs, Metric, ParamGroups, LossOptions  # noqa: F401
from ._ddp import Error  # noqa: F401  (raised by every failing call: .status, .message)
from . import ddp as _ddp


@_functools.lru_cache(maxsize=None)
def _numpy():
    """NumPy, imported when an array is first wrapped: torch-only and bytes-only users need none."""
    import numpy
    to = {
        numpy.dtype(numpy.float32): _ddp.FLOAT32, numpy.dtype(numpy.float64): _ddp.FLOAT64,
        numpy.dtype(numpy.float16): _ddp.FLOAT16, numpy.dtype(numpy.int8): _ddp.INT8,
        numpy.dtype(numpy.uint8): _ddp.UINT8, numpy.dtype(numpy.int32): _ddp.INT32,
        numpy.dtype(numpy.int64): _ddp.INT64, numpy.dtype(numpy.bool_): _ddp.BOOL,
    }
    return numpy, to, {v: k for k, v in to.items()}


def wrap(array):
    """A Tensor viewing a C-contiguous NumPy array's memory (no copy); the
    Tensor keeps the array alive."""
    np, to_dtype, _ = _numpy()
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
        raise TypeError("wrap: expected a writable C-contiguous numpy.ndarray")
    dtype = to_dtype.get(array.dtype)
    if dtype is None:
        raise TypeError(f"wrap: unsupported dtype {array.dtype}")
    t = Tensor.wrap(array, dtype, list(array.shape))
    t._owner = array
    return t


def to_numpy(tensor):
    """A NumPy copy of a Tensor's elements (the array itself for wrapped ones)."""
    owner = getattr(tensor, "_owner", None)
    if owner is not None:
        return owner
    np, _, from_dtype = _numpy()
    shape = [tensor.dim_size(i) for i in range(tensor.ndim())]
    out = np.empty(shape, dtype=from_dtype[tensor.dtype()])
    tensor.copy_to(out)
    return out


def reducer(group, grads, **options):
    """A Reducer over NumPy gradient arrays (reduced in place); it keeps them alive."""
    return Reducer(group, [wrap(g) for g in grads], **options)


def from_dlpack(obj):
    """A Tensor sharing the memory of a torch tensor (a parameter's .grad
    too), a NumPy array or anything with __dlpack__, or of an unused DLPack
    capsule: no copy, contiguous memory, CPU or CUDA. What libddp writes into it
    (an all_reduce, a broadcast) the owner sees."""
    capsule = obj.__dlpack__() if hasattr(obj, "__dlpack__") else obj
    return Tensor.from_dlpack_address(_ddp.ddp_py_dlpack_take(capsule))


def _tensor_dlpack(self, stream=None):
    """DLPack export: torch.from_dlpack(t) and numpy.from_dlpack(t) view this
    tensor's memory without a copy. `stream` is accepted for CUDA consumers:
    libddp's collectives have finished when they return."""
    return _ddp.ddp_py_dlpack_capsule(self.to_dlpack_address())


def _tensor_dlpack_device(self):
    return (2, self.device_index()) if self.is_cuda() else (1, 0)


Tensor.__dlpack__ = _tensor_dlpack
Tensor.__dlpack_device__ = _tensor_dlpack_device


# Arithmetic with autograd (ops.h): each operator is one libddp call.
def _binary(op, reflected=False):
    def apply(self, other):
        if isinstance(other, Tensor):
            return self.binary(op, other)
        if reflected:  # scalar (op) tensor: the scalar as a tensor of self's shape, outside the graph
            return self.clone().binary_scalar(OP_MUL, 0.0).binary_scalar(OP_ADD, float(other)).binary(op, self)
        return self.binary_scalar(op, float(other))
    return apply


for _name, _op in (("add", OP_ADD), ("sub", OP_SUB), ("mul", OP_MUL), ("truediv", OP_DIV), ("pow", OP_POW)):
    setattr(Tensor, f"__{_name}__", _binary(_op))
    setattr(Tensor, f"__r{_name}__", _binary(_op, reflected=_op in (OP_SUB, OP_DIV, OP_POW)))
Tensor.__neg__ = lambda self: self.unary(OP_NEG)
_sum, _mean = Tensor.sum, Tensor.mean
Tensor.sum = lambda self, dims=(), keepdim=False: _sum(self, list(dims), keepdim)
Tensor.mean = lambda self, dims=(), keepdim=False: _mean(self, list(dims), keepdim)
for _name, _op in (("exp", OP_EXP), ("log", OP_LOG), ("sqrt", OP_SQRT), ("abs", OP_ABS), ("relu", OP_RELU),
                   ("sigmoid", OP_SIGMOID), ("tanh", OP_TANH)):
    setattr(Tensor, _name, (lambda op: lambda self: self.unary(op))(_op))


def _outputs_list(outputs):
    """An Outputs as Python values: a Tensor, a tuple of them, or a dict."""
    n = outputs.count()
    if n and outputs.key(0) is not None:
        return {outputs.key(i): outputs.at(i) for i in range(n)}
    return tuple(outputs.at(i) for i in range(n))


def _module_call(self, *inputs, method=None, **kwargs):
    """The module's method (forward by default) on tensors, with keyword
    tensors: a tuple of Tensors, or a dict for a dict output."""
    return _outputs_list(_ddp.Module.call(self, method, list(inputs), list(kwargs), list(kwargs.values())))


def _strategy_call(self, module, *inputs, method=None, **kwargs):
    """Strategy.forward for any method with several and keyword inputs (Module.call's results)."""
    return _outputs_list(_ddp.Strategy.call(self, module, method, list(inputs), list(kwargs), list(kwargs.values())))


Module.__call__ = _module_call
Strategy.__call__ = _strategy_call


def loss(kind, input, target, **options):
    """A torch.nn.functional loss (libddp.LOSS_CROSS_ENTROPY, ...) with its
    keyword arguments (reduction=libddp.REDUCTION_SUM, weight=, label_smoothing=, ...)."""
    return _ddp.loss(_filled(LossOptions(kind), options), input, target)


def param_groups(*groups):
    """ParamGroups from dicts: param_groups({"params": ["*.bias"], "weight_decay": 0}, {"params": []})."""
    out = ParamGroups()
    for g in groups:
        g = dict(g)
        out.add(list(g.pop("params", [])), **g)
    return out


def _filled(options, values):
    for key, value in values.items():
        if key.startswith("_") or not hasattr(type(options), key):
            raise TypeError(f"{type(options).__name__} has no option {key!r}")
        setattr(options, key, value)
    return options


def strategy(checkpoint_io=None, cluster_environment=None, **options):
    """A Strategy with DDPStrategy's keyword arguments (StrategyOptions'
    fields, Lightning's defaults): strategy(devices=2, precision="bf16-mixed",
    comm_hook=libddp.CommHook.fp16_compress(), state_dict_prefix="net.").
    checkpoint_io: an object with Lightning's CheckpointIO methods
    save(path, data: bytes), load(path) -> bytes, remove(path).
    cluster_environment: an object with ClusterEnvironment's world_size(),
    global_rank(), local_rank(), local_world_size(), node_rank(),
    main_address and main_port (methods or attributes)."""
    o = _filled(StrategyOptions(), options)
    if checkpoint_io is not None:
        _ddp.ddp_py_set_checkpoint_io(o, checkpoint_io)
    if cluster_environment is not None:
        _ddp.ddp_py_set_cluster_environment(o, cluster_environment)
    return Strategy.from_options(o)


def reducer_with(group, tensors, **options):
    """A Reducer over Tensors with ReducerOptions' keyword arguments
    (broadcast_parameters, join_enabled, find_unused_parameters, ...)."""
    return Reducer.with_options(group, tensors, _filled(ReducerOptions(), options))


def sampler_order(dataset_size, num_replicas, rank, epoch, **options):
    """DistributedSampler's indices (a list) with SamplerOptions' keyword
    arguments (shuffle, seed, drop_last, unrepeated, start)."""
    t = sampler_indices_with(dataset_size, num_replicas, rank, epoch, _filled(SamplerOptions(), options))
    return to_numpy(t).tolist()


def lr_scheduler(optimizer, kind, **options):
    """An LrScheduler of this kind (libddp.LR_COSINE_ANNEALING, ...) with
    LrSchedulerOptions' keyword arguments (t_max, gamma, ...)."""
    return LrScheduler(optimizer, _filled(LrSchedulerOptions(kind), options))


class Bucket:
    """One ready bucket, as a custom comm hook sees it: `buffer` (a Tensor,
    valid during the hook's call only: reduce it in place), `index`,
    `is_last`, `divisor` (the ranks to average over) and `params`, one
    (parameter index, element offset, shape) per gradient in it."""
    __slots__ = ("buffer", "index", "is_last", "divisor", "params")

    def __init__(self, buffer, index, is_last, divisor, params):
        self.buffer, self.index, self.is_last, self.divisor, self.params = buffer, index, is_last, divisor, params


def _custom_hook(fn):
    """A comm hook written in Python: fn(group, bucket) reduces bucket.buffer
    in place, e.g. group.all_reduce(bucket.buffer) then a division by
    bucket.divisor (torch.from_dlpack(bucket.buffer) views it). It runs on
    the thread that completed the bucket; an exception fails the step on
    every rank (libddp.Error's status, else E_INTERNAL)."""
    if not callable(fn):
        raise TypeError("CommHook.custom: fn must be callable")
    hook = _ddp.ddp_py_comm_hook_custom(lambda group, *bucket: fn(group, Bucket(*bucket)))
    hook._fn = fn
    return hook


CommHook.custom = staticmethod(_custom_hook)


def _close(self):
    """Frees the handle now (otherwise when the object is collected)."""
    if getattr(self, "thisown", False):
        self.thisown = False
        self.__swig_destroy__(self)


for _cls in (Tensor, Group, Reducer, CommHook, ModelAverager, Module, Optimizer, Strategy, LrScheduler, Work, Env,
             Outputs, Metric, ParamGroups, LossOptions, StrategyOptions,
             ReducerOptions, SgdOptions, AdamOptions, SamplerOptions, LrSchedulerOptions, CheckpointInfo):
    _cls.close = _close
    _cls.__enter__ = lambda self: self
    _cls.__exit__ = lambda self, *exc: self.close()
