"""Minimal ctypes access to libddp for the parity tests (test code only;
the real Python binding is the SWIG one)."""
import ctypes
import os

import torch

DTYPES = {
    torch.float32: 0, torch.float64: 1, torch.float16: 2, torch.bfloat16: 3,
    torch.int8: 4, torch.uint8: 5, torch.int32: 6, torch.int64: 7, torch.bool: 8,
}
SUM, MEAN, MIN, MAX, PRODUCT = range(5)


class ReducerOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("bucket_cap_mb", ctypes.c_double), ("first_bucket_mb", ctypes.c_double),
                ("find_unused_parameters", ctypes.c_int), ("gradient_as_bucket_view", ctypes.c_int),
                ("broadcast_parameters", ctypes.c_int), ("autograd_hooks", ctypes.c_int),
                ("join_enabled", ctypes.c_int), ("static_graph", ctypes.c_int)]


class PowerSGDOptions(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint), ("matrix_approximation_rank", ctypes.c_int),
                ("start_powersgd_iter", ctypes.c_int64), ("min_compression_rate", ctypes.c_double),
                ("use_error_feedback", ctypes.c_int), ("warm_start", ctypes.c_int),
                ("orthogonalization_epsilon", ctypes.c_double), ("random_seed", ctypes.c_uint32),
                ("batch_tensors_with_same_shape", ctypes.c_int), ("batched", ctypes.c_int)]


class CompressionStats(ctypes.Structure):
    _fields_ = [("numel_before", ctypes.c_uint64), ("numel_after", ctypes.c_uint64), ("iteration", ctypes.c_int64)]


def exit_now(code):
    """Ends a worker once its results are printed and its handles freed,
    without interpreter finalization: destroying torch's process groups
    there, while Python objects still reference them, can abort the process
    ("terminate called without an active exception", seen in 1 of 2 runs of
    the post-local SGD worker and once in a fresh-clone run of the PowerSGD
    worker), which would fail a comparison that passed."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class DDPError(RuntimeError):
    pass


class Lib:
    def __init__(self, path=None):
        path = path or os.environ["DDP_LIB"]
        self.lib = ctypes.CDLL(path)
        L = self.lib
        vp, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
        L.ddp_last_error_message.restype = ctypes.c_char_p
        L.ddp_env_new.argtypes = [ctypes.POINTER(vp), ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        L.ddp_group_init.argtypes = [ctypes.POINTER(vp), vp, vp]
        L.ddp_tensor_from_blob.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_int, i64p, ctypes.c_size_t]
        L.ddp_tensor_free.argtypes = [vp]
        L.ddp_tensor_data.argtypes = [vp]
        L.ddp_tensor_data.restype = vp
        L.ddp_tensor_ndim.argtypes = [vp]
        L.ddp_tensor_ndim.restype = ctypes.c_size_t
        L.ddp_tensor_shape.argtypes = [vp]
        L.ddp_tensor_shape.restype = i64p
        L.ddp_tensor_nbytes.argtypes = [vp]
        L.ddp_tensor_nbytes.restype = ctypes.c_size_t
        L.ddp_tensor_copy_to.argtypes = [vp, vp, ctypes.c_size_t]
        L.ddp_all_reduce.argtypes = [vp, vp, ctypes.c_int]
        L.ddp_all_gather_uneven.argtypes = [vp, vp, ctypes.POINTER(vp)]
        L.ddp_all_gather.argtypes = [vp, vp, ctypes.POINTER(vp)]
        L.ddp_group_free.argtypes = [vp]
        L.ddp_reducer_new.argtypes = [ctypes.POINTER(vp), vp, ctypes.POINTER(vp), ctypes.POINTER(vp), ctypes.c_size_t,
                                      ctypes.POINTER(ReducerOptions)]
        L.ddp_reducer_mark_ready.argtypes = [vp, ctypes.c_size_t]
        L.ddp_reducer_finish.argtypes = [vp]
        L.ddp_reducer_set_sync.argtypes = [vp, ctypes.c_int]
        L.ddp_reducer_bucket_count.argtypes = [vp]
        L.ddp_reducer_bucket_count.restype = ctypes.c_size_t
        L.ddp_reducer_bucket_indices.argtypes = [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                                 ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t)]
        L.ddp_reducer_free.argtypes = [vp]
        L.ddp_env_free.argtypes = [vp]
        L.ddp_group_new_subgroups.argtypes = [vp, ctypes.c_int, ctypes.POINTER(vp)]
        L.ddp_powersgd_options_init.argtypes = [ctypes.POINTER(PowerSGDOptions), ctypes.c_uint]
        L.ddp_comm_hook_powersgd.argtypes = [ctypes.POINTER(vp), ctypes.POINTER(PowerSGDOptions)]
        L.ddp_comm_hook_compression_stats.argtypes = [vp, ctypes.POINTER(CompressionStats)]
        L.ddp_comm_hook_wrap_fp16.argtypes = [ctypes.POINTER(vp), vp]
        L.ddp_comm_hook_post_localsgd.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_int64, ctypes.c_int]
        L.ddp_comm_hook_free.argtypes = [vp]
        L.ddp_reducer_set_comm_hook.argtypes = [vp, vp]
        L.ddp_model_averager_new.argtypes = [ctypes.POINTER(vp), vp, ctypes.c_int64, ctypes.c_int64]
        L.ddp_model_averager_step.argtypes = [vp, ctypes.POINTER(vp), ctypes.c_size_t]
        L.ddp_model_averager_free.argtypes = [vp]
        L.ddp_module_load.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p]
        L.ddp_module_free.argtypes = [vp]
        L.ddp_module_forward.argtypes = [vp, vp, ctypes.POINTER(vp)]
        L.ddp_module_train.argtypes = [vp, ctypes.c_int]
        L.ddp_module_state_count.argtypes = [vp]
        L.ddp_module_state_count.restype = ctypes.c_size_t
        L.ddp_module_state_name.argtypes = [vp, ctypes.c_size_t, ctypes.POINTER(ctypes.c_char_p),
                                            ctypes.POINTER(ctypes.c_int)]
        L.ddp_module_get.argtypes = [vp, ctypes.c_char_p, ctypes.POINTER(vp)]
        L.ddp_module_set.argtypes = [vp, ctypes.c_char_p, vp]
        L.ddp_module_save.argtypes = [vp, ctypes.c_char_p]
        L.ddp_module_save_state_dict.argtypes = [vp, ctypes.c_char_p]
        L.ddp_module_load_state_dict.argtypes = [vp, ctypes.c_char_p, ctypes.c_int]

    def check(self, status, what):
        if status != 0:
            raise DDPError(f"{what}: status {status}: {self.lib.ddp_last_error_message().decode()}")

    def group(self, rank, world, port):
        env, g = ctypes.c_void_p(), ctypes.c_void_p()
        self.check(self.lib.ddp_env_new(ctypes.byref(env), rank, world, rank, world, 0, b"127.0.0.1", port), "env")
        self.check(self.lib.ddp_group_init(ctypes.byref(g), env, None), "group_init")
        self.lib.ddp_env_free(env)
        return g

    def reducer(self, group, params, grads, find_unused=False, broadcast=True, first_mb=1.0, cap_mb=25.0,
                static_graph=False):
        """A reducer over torch tensors' memory; returns (handle, keep-alive list)."""
        ph = [self.wrap(p) for p in params] if params is not None else None
        gh = [self.wrap(g) for g in grads]
        parr = (ctypes.c_void_p * len(ph))(*[h.value for h in ph]) if ph else None
        garr = (ctypes.c_void_p * len(gh))(*[h.value for h in gh])
        opts = ReducerOptions(2, cap_mb, first_mb, int(find_unused), 0, int(broadcast), 0, 0, int(static_graph))
        r = ctypes.c_void_p()
        self.check(self.lib.ddp_reducer_new(ctypes.byref(r), group, parr, garr, len(gh), ctypes.byref(opts)),
                   "reducer_new")
        return r, (ph or []) + gh

    def powersgd_options(self, **fields):
        """PowerSGD options: the library's defaults with `fields` changed."""
        o = PowerSGDOptions()
        self.check(self.lib.ddp_powersgd_options_init(ctypes.byref(o), 1), "powersgd_options_init")
        for k, v in fields.items():
            setattr(o, k, v)
        return o

    def bucket_layout(self, reducer, n):
        """The reducer's buckets: for each, the indices of its gradients in order."""
        layout = []
        for b in range(self.lib.ddp_reducer_bucket_count(reducer)):
            idx = (ctypes.c_size_t * n)()
            k = ctypes.c_size_t()
            self.check(self.lib.ddp_reducer_bucket_indices(reducer, b, idx, n, ctypes.byref(k)), "bucket_indices")
            layout.append([idx[i] for i in range(k.value)])
        return layout

    def reduce_all(self, reducer, n):
        """Marks the n gradients ready as backward would (last first) and finishes the step."""
        for i in reversed(range(n)):
            self.check(self.lib.ddp_reducer_mark_ready(reducer, i), "mark_ready")
        self.check(self.lib.ddp_reducer_finish(reducer), "finish")

    def wrap(self, t):
        """A ddp_tensor viewing torch tensor t's memory (t must stay alive)."""
        assert t.is_contiguous()
        h = ctypes.c_void_p()
        shape = (ctypes.c_int64 * max(t.dim(), 1))(*t.shape)
        self.check(self.lib.ddp_tensor_from_blob(ctypes.byref(h), t.data_ptr(), DTYPES[t.dtype], shape, t.dim()),
                   "from_blob")
        return h

    def to_torch(self, h, dtype):
        nd = self.lib.ddp_tensor_ndim(h)
        sh = self.lib.ddp_tensor_shape(h)
        shape = [sh[i] for i in range(nd)]
        out = torch.empty(shape, dtype=dtype)
        self.check(self.lib.ddp_tensor_copy_to(h, out.data_ptr(), self.lib.ddp_tensor_nbytes(h)), "copy_to")
        return out

    def module(self, path):
        m = ctypes.c_void_p()
        self.check(self.lib.ddp_module_load(ctypes.byref(m), path.encode()), "module_load")
        return m

    def module_state(self, m):
        """The module's state by name, read through ddp_module_state_name and ddp_module_get."""
        out = {}
        for i in range(self.lib.ddp_module_state_count(m)):
            name, is_param = ctypes.c_char_p(), ctypes.c_int()
            self.check(self.lib.ddp_module_state_name(m, i, ctypes.byref(name), ctypes.byref(is_param)), "state_name")
            h = ctypes.c_void_p()
            self.check(self.lib.ddp_module_get(m, name.value, ctypes.byref(h)), "module_get")
            out[name.value.decode()] = self.to_torch(h, torch.float32)
            self.lib.ddp_tensor_free(h)
        return out

    def forward(self, m, x):
        """ddp_module_forward of torch tensor x (float32); the output as a torch tensor."""
        h, y = self.wrap(x), ctypes.c_void_p()
        try:
            self.check(self.lib.ddp_module_forward(m, h, ctypes.byref(y)), "module_forward")
            return self.to_torch(y, torch.float32)
        finally:
            self.lib.ddp_tensor_free(h)
            self.lib.ddp_tensor_free(y)
