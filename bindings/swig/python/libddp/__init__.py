"""libddp from Python: the C API through SWIG (module libddp.ddp), plus
glue for NumPy arrays and `with` blocks. Every operation is one libddp call.

    import numpy as np, libddp
    with libddp.Group() as g:                  # the environment (torchrun, ...)
        x = np.ones(4, np.float32)
        g.all_reduce(libddp.wrap(x), libddp.SUM)   # in place, no copy
"""
import numpy as _np

from .ddp import *  # noqa: F401,F403
from .ddp import Tensor, Group, Reducer, CommHook, ModelAverager, Worker, Module, Optimizer, Strategy  # noqa: F401
from ._ddp import Error  # noqa: F401  (raised by every failing call: .status, .message)
from . import ddp as _ddp

_TO_DTYPE = {
    _np.dtype(_np.float32): _ddp.FLOAT32, _np.dtype(_np.float64): _ddp.FLOAT64, _np.dtype(_np.float16): _ddp.FLOAT16,
    _np.dtype(_np.int8): _ddp.INT8, _np.dtype(_np.uint8): _ddp.UINT8, _np.dtype(_np.int32): _ddp.INT32,
    _np.dtype(_np.int64): _ddp.INT64, _np.dtype(_np.bool_): _ddp.BOOL,
}
_FROM_DTYPE = {v: k for k, v in _TO_DTYPE.items()}


def wrap(array):
    """A Tensor viewing a C-contiguous NumPy array's memory (no copy); the
    Tensor keeps the array alive."""
    if not isinstance(array, _np.ndarray) or not array.flags.c_contiguous or not array.flags.writeable:
        raise TypeError("wrap: expected a writable C-contiguous numpy.ndarray")
    dtype = _TO_DTYPE.get(array.dtype)
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
    shape = [tensor.dim_size(i) for i in range(tensor.ndim())]
    out = _np.empty(shape, dtype=_FROM_DTYPE[tensor.dtype()])
    tensor.copy_to(out)
    return out


def reducer(group, grads, **options):
    """A Reducer over NumPy gradient arrays (reduced in place); it keeps them alive."""
    return Reducer(group, [wrap(g) for g in grads], **options)


def _close(self):
    """Frees the handle now (otherwise when the object is collected)."""
    if getattr(self, "thisown", False):
        self.thisown = False
        self.__swig_destroy__(self)


for _cls in (Tensor, Group, Reducer, CommHook, ModelAverager, Module, Optimizer, Strategy):
    _cls.close = _close
    _cls.__enter__ = lambda self: self
    _cls.__exit__ = lambda self, *exc: self.close()
