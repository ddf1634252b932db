/* Python side of ddp.i: exceptions, the buffer protocol (NumPy arrays
 * without copies), sequences, and spawn with a Python callable. */

%{
static PyObject *ddp_py_error = NULL; /* libddp.Error(status, message) */

static void ddp_py_raise(ddp_status s) {
  if (PyErr_Occurred()) return; /* a Python callback's own exception goes up as it is */
  const char *msg = ddp_last_error_message();
  PyObject *exc = PyObject_CallFunction(ddp_py_error, "is", (int)s, msg && *msg ? msg : ddp_status_string(s));
  if (!exc) return;
  PyObject *st = PyLong_FromLong(s), *m = PyUnicode_FromString(msg ? msg : "");
  PyObject_SetAttrString(exc, "status", st);
  PyObject_SetAttrString(exc, "message", m);
  Py_XDECREF(st);
  Py_XDECREF(m);
  PyErr_SetObject(ddp_py_error, exc);
  Py_DECREF(exc);
}
%}

%init %{
  ddp_py_error = PyErr_NewExceptionWithDoc("libddp.ddp.Error",
      "A libddp call failed: .status (a libddp status code) and .message (what went wrong).",
      PyExc_RuntimeError, NULL);
  Py_INCREF(ddp_py_error);
  PyModule_AddObject(m, "Error", ddp_py_error);
%}

%exception {
  ddp_swig_status = DDP_OK;
  $action
  if (ddp_swig_status != DDP_OK) {
    ddp_py_raise(ddp_swig_status);
    SWIG_fail;
  }
}

%feature("kwargs");
/* Every method's docstring carries its signature with types (help(libddp.Group.all_reduce)). */
%feature("autodoc", "2");

/* A reducer reduces its tensors' memory in place: keep them (and so the
 * arrays they view) alive as long as the reducer. */
%pythonappend DdpReducer::DdpReducer %{
        self._keep = list(TENSORS)
%}

/* An optimizer steps its module's parameters, a strategy drives its
 * module: each keeps the module object alive. */
%pythonappend DdpOptimizer::sgd %{
    val._module = module
%}
%pythonappend DdpOptimizer::adam %{
    val._module = module
%}
%pythonappend DdpOptimizer::adamw %{
    val._module = module
%}
%pythonappend DdpStrategy::setup_module %{
        self._module = module
%}

/* Shapes: any sequence of ints. */
%typemap(in) (const int64_t *SHAPE, size_t NDIM) {
  PyObject *seq = PySequence_Fast($input, "shape must be a sequence of ints");
  if (!seq) SWIG_fail;
  $2 = (size_t)PySequence_Fast_GET_SIZE(seq);
  $1 = (int64_t *)calloc($2 ? $2 : 1, sizeof(int64_t));
  for (size_t i = 0; i < $2; ++i) $1[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
  Py_DECREF(seq);
  if (PyErr_Occurred()) SWIG_fail;
}
%typemap(freearg) (const int64_t *SHAPE, size_t NDIM) { free($1); }

/* Writable memory through the buffer protocol (NumPy arrays, bytearray). */
%typemap(in) (void *BUFFER, size_t BUFLEN) (Py_buffer view) {
  if (PyObject_GetBuffer($input, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) SWIG_fail;
  $1 = view.buf;
  $2 = (size_t)view.len;
  PyBuffer_Release(&view); /* the caller keeps the object (and so the memory) alive */
}
/* Readable memory (bytes too); None is no bytes. */
%typemap(in) (const void *CBUFFER, size_t CBUFLEN) (Py_buffer view) {
  if ($input == Py_None) {
    $1 = NULL;
    $2 = 0;
  } else {
    if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) < 0) SWIG_fail;
    $1 = view.buf;
    $2 = (size_t)view.len;
    PyBuffer_Release(&view);
  }
}

/* A sequence of handles of one kind (None entries pass as NULL). */
%define DDP_PY_HANDLE_LIST(TYPE, ARRAY, COUNT, WHAT)
%typemap(in) (TYPE **ARRAY, size_t COUNT) {
  PyObject *seq = PySequence_Fast($input, "expected a sequence of " WHAT);
  if (!seq) SWIG_fail;
  $2 = (size_t)PySequence_Fast_GET_SIZE(seq);
  $1 = (TYPE **)calloc($2 ? $2 : 1, sizeof(TYPE *));
  for (size_t i = 0; i < $2; ++i) {
    void *p = NULL;
    if (!SWIG_IsOK(SWIG_ConvertPtr(PySequence_Fast_GET_ITEM(seq, i), &p, $descriptor(TYPE *), 0))) {
      Py_DECREF(seq);
      free($1);
      $1 = NULL;
      SWIG_exception_fail(SWIG_TypeError, "expected a sequence of " WHAT);
    }
    $1[i] = (TYPE *)p;
  }
  Py_DECREF(seq);
}
%typemap(freearg) (TYPE **ARRAY, size_t COUNT) { free($1); }
%enddef
DDP_PY_HANDLE_LIST(DdpTensor, TENSORS, NTENSORS, "Tensor")
DDP_PY_HANDLE_LIST(DdpModule, MODULES, NMODULES, "Module")
DDP_PY_HANDLE_LIST(DdpOptimizer, OPTIMIZERS, NOPTIMIZERS, "Optimizer")
DDP_PY_HANDLE_LIST(DdpLrScheduler, SCHEDULERS, NSCHEDULERS, "LrScheduler")

/* Results of several values (ddp.i's DdpTensorArray, DdpBytes): a list of
 * new Tensors, and bytes. */
%typemap(out) DdpTensorArray {
  if ($1.items) {
    $result = PyList_New($1.n);
    for (int i = 0; i < $1.n; ++i)
      PyList_SetItem($result, i, SWIG_NewPointerObj($1.items[i], $descriptor(DdpTensor *), SWIG_POINTER_OWN));
    free($1.items);
  } else {
    $result = SWIG_Py_Void();
  }
}
%typemap(out) DdpBytes {
  if ($1.buf) {
    $result = PyBytes_FromStringAndSize((const char *)ddp_buffer_data($1.buf), (Py_ssize_t)ddp_buffer_size($1.buf));
    ddp_buffer_free($1.buf);
  } else {
    $result = SWIG_Py_Void();
  }
}

%include <typemaps.i>
%apply long long *OUTPUT { long long *OUT_BEFORE, long long *OUT_AFTER, long long *OUT_ITER };
%apply long long *OUTPUT { long long *OUT_STEP, long long *OUT_EPOCH };

/* ---- spawn with a Python callable ----------------------------------------
 * fn(worker, arg: bytes) runs in each of nprocs processes (popen re-runs this
 * script up to the spawn call, which then becomes the worker) and returns 0
 * or an exit code; worker.set_result(bytes) on rank 0 is spawn's result. */
%{
static PyObject *ddp_py_worker_fn = NULL;

static void ddp_py_flush(const char *name) {
  PyObject *f = PySys_GetObject(name);
  if (f) {
    PyObject *r = PyObject_CallMethod(f, "flush", NULL);
    Py_XDECREF(r);
  }
  PyErr_Clear();
}

static int ddp_py_trampoline(DdpWorker *w, const void *arg, size_t len) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *pw = SWIG_NewPointerObj(w, SWIGTYPE_p_DdpWorker, 0);
  PyObject *pa = PyBytes_FromStringAndSize((const char *)arg, (Py_ssize_t)len);
  PyObject *r = PyObject_CallFunctionObjArgs(ddp_py_worker_fn, pw, pa, NULL);
  int rc = 0;
  if (!r) {
    PyErr_Print(); /* the traceback, then a failing exit code for the launcher */
    rc = 1;
  } else {
    rc = r == Py_None ? 0 : (int)PyLong_AsLong(r);
    Py_DECREF(r);
  }
  Py_XDECREF(pw);
  Py_XDECREF(pa);
  /* The worker process ends in C right after this: flush Python's buffers. */
  ddp_py_flush("stdout");
  ddp_py_flush("stderr");
  PyGILState_Release(gil);
  return rc;
}
%}

%exception ddp_py_spawn {
  ddp_swig_status = DDP_OK;
  $action
  if (ddp_swig_status != DDP_OK) {
    ddp_py_raise(ddp_swig_status);
    SWIG_fail;
  }
  if (!result) SWIG_fail;
}
%rename(spawn) ddp_py_spawn;
%nothread ddp_py_spawn; /* it handles Python objects itself; the trampoline takes the GIL in workers */
%{
/* Returns rank 0's result (bytes; b"" when none). */
static PyObject *ddp_py_spawn(PyObject *fn, int nprocs, const void *CBUFFER, size_t CBUFLEN,
                              ddp_start_method start_method, long long timeout_ms) {
  ddp_spawn_options o = DDP_SPAWN_OPTIONS_INIT;
  ddp_buffer *res = NULL;
  PyObject *out;
  if (!PyCallable_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "spawn: fn must be callable");
    return NULL;
  }
  o.nprocs = nprocs;
  o.start_method = start_method;
  o.timeout_ms = timeout_ms;
  Py_XDECREF(ddp_py_worker_fn);
  Py_INCREF(fn);
  ddp_py_worker_fn = fn;
  if (ddp_swig_check(ddp_spawn(&o, ddp_py_trampoline, CBUFFER, CBUFLEN, &res))) {
    Py_INCREF(Py_None);
    return Py_None;
  }
  out = res ? PyBytes_FromStringAndSize((const char *)ddp_buffer_data(res), (Py_ssize_t)ddp_buffer_size(res))
            : PyBytes_FromStringAndSize("", 0);
  ddp_buffer_free(res);
  return out;
}
%}
PyObject *ddp_py_spawn(PyObject *fn, int nprocs, const void *CBUFFER = NULL, size_t CBUFLEN = 0,
                       ddp_start_method start_method = DDP_START_POPEN, long long timeout_ms = 0);

/* ---- DLPack: torch (and NumPy, JAX) tensors in and out without a copy ----
 * A capsule named "dltensor" holds a DLManagedTensor. Taking one renames it
 * "used_dltensor" (the protocol's mark that the consumer, here libddp, now
 * owns it); a capsule made here deletes its tensor unless a consumer took
 * it. Only the struct's tail (manager_ctx, deleter) is read, so it is
 * declared up to there (dlpack.h's layout, stable since DLPack 0.2). */
%{
typedef struct {
  void *data;
  struct { int32_t device_type, device_id; } device;
  int32_t ndim;
  struct { uint8_t code, bits; uint16_t lanes; } dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} ddp_py_dltensor;
typedef struct ddp_py_dlmanaged {
  ddp_py_dltensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct ddp_py_dlmanaged *self);
} ddp_py_dlmanaged;

static void ddp_py_dlpack_capsule_free(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    ddp_py_dlmanaged *m = (ddp_py_dlmanaged *)PyCapsule_GetPointer(capsule, "dltensor");
    if (m && m->deleter) m->deleter(m);
  }
}
%}
%nothread ddp_py_dlpack_take;
%nothread ddp_py_dlpack_capsule;
%exception ddp_py_dlpack_take {
  $action
  if (PyErr_Occurred()) SWIG_fail;
}
%exception ddp_py_dlpack_capsule {
  $action
  if (!result) SWIG_fail;
}
%inline %{
/* The DLManagedTensor of an unused "dltensor" capsule, by address; the
 * capsule is marked used (its memory is libddp's to delete from now on). */
long long ddp_py_dlpack_take(PyObject *capsule) {
  void *p;
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    PyErr_SetString(PyExc_TypeError, "expected an unused DLPack capsule (\"dltensor\"), e.g. tensor.__dlpack__()");
    return 0;
  }
  p = PyCapsule_GetPointer(capsule, "dltensor");
  if (PyCapsule_SetName(capsule, "used_dltensor") < 0) return 0;
  return (long long)(intptr_t)p;
}
/* A "dltensor" capsule around a DLManagedTensor made by libddp. */
PyObject *ddp_py_dlpack_capsule(long long address) {
  return PyCapsule_New((void *)(intptr_t)address, "dltensor", ddp_py_dlpack_capsule_free);
}
%}

/* A list of names (Module.from_tensors): a sequence of str, each copied for the call. */
%typemap(in) char **STRING_ARRAY {
  PyObject *seq = PySequence_Fast($input, "expected a sequence of str");
  if (!seq) SWIG_fail;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  $1 = (char **)calloc((size_t)n + 1, sizeof(char *));
  for (Py_ssize_t i = 0; $1 && i < n; ++i) {
    const char *u = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
    $1[i] = u ? strdup(u) : NULL;
    if (!$1[i]) break;
  }
  Py_DECREF(seq);
  if (PyErr_Occurred()) SWIG_fail;
}
%typemap(freearg) char **STRING_ARRAY {
  for (size_t i = 0; $1 && $1[i]; ++i) free($1[i]);
  free($1);
}

/* Objects that hold memory another object owns keep that object alive. */
%pythonappend DdpReducer::with_options %{
    val._keep = list(TENSORS)
%}
%pythonappend DdpOptimizer::sgd_with %{
    val._module = module
%}
%pythonappend DdpOptimizer::adam_with %{
    val._module = module
%}
%pythonappend DdpOptimizer::adamw_with %{
    val._module = module
%}
%pythonappend DdpLrScheduler::DdpLrScheduler %{
        self._optimizer = optimizer
%}
%pythonappend DdpModule::from_tensors %{
    val._keep = list(TENSORS)
%}

/* ---- custom comm hooks: a Python callable ---------------------------------
 * fn(group, buffer, index, is_last, divisor, params) runs for each ready
 * bucket, on whichever thread completed it (it takes the GIL), and must
 * leave the reduced bucket in buffer (a Tensor valid during the call only),
 * e.g. group.all_reduce(buffer) and a division by divisor. params: one
 * (parameter index, element offset, shape) per gradient in the bucket. An
 * exception fails the step on every rank: libddp.Error's status, else
 * E_INTERNAL. libddp/__init__.py wraps this as CommHook.custom(fn). */
%{
static ddp_status ddp_py_hook_trampoline(ddp_group *group, const ddp_comm_bucket *b, void *user) {
  PyGILState_STATE gil = PyGILState_Ensure();
  ddp_status rc = DDP_OK;
  PyObject *pg = SWIG_NewPointerObj(group, SWIGTYPE_p_DdpGroup, 0);
  PyObject *pt = SWIG_NewPointerObj(b->buffer, SWIGTYPE_p_DdpTensor, 0);
  PyObject *params = PyList_New((Py_ssize_t)b->num_params);
  for (size_t k = 0; params && k < b->num_params; ++k) {
    PyObject *shape = PyTuple_New((Py_ssize_t)b->ndims[k]);
    for (size_t d = 0; shape && d < b->ndims[k]; ++d)
      PyTuple_SET_ITEM(shape, (Py_ssize_t)d, PyLong_FromLongLong(b->shapes[k][d]));
    PyList_SET_ITEM(params, (Py_ssize_t)k, Py_BuildValue("(nLN)", (Py_ssize_t)b->param_indices[k],
                                                          (long long)b->offsets[k], shape));
  }
  PyObject *r = PyObject_CallFunction((PyObject *)user, "OOnOiO", pg, pt, (Py_ssize_t)b->index,
                                      b->is_last ? Py_True : Py_False, b->divisor, params);
  if (!r) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    /* libddp.Error(status, message) raised in Python carries the status as its first argument. */
    PyObject *st = NULL;
    if (value && PyObject_IsInstance(value, ddp_py_error) == 1) {
      PyObject *args = PyObject_GetAttrString(value, "args");
      if (args && PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0) {
        st = PyTuple_GET_ITEM(args, 0);
        Py_INCREF(st);
      }
      Py_XDECREF(args);
    }
    rc = st && PyLong_Check(st) ? (ddp_status)PyLong_AsLong(st) : DDP_E_INTERNAL;
    if (rc == DDP_OK) rc = DDP_E_INTERNAL;
    Py_XDECREF(st);
    /* The exception's text becomes the reason libddp reports on every rank. */
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *utf8 = text ? PyUnicode_AsUTF8(text) : NULL;
    char reason[1024];
    snprintf(reason, sizeof reason, "%s: %s", type ? ((PyTypeObject *)type)->tp_name : "exception", utf8 ? utf8 : "");
    ddp_error_set(reason);
    Py_XDECREF(text);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    PyErr_Print(); /* the traceback on this rank; every rank's call fails with rc */
  }
  Py_XDECREF(r);
  Py_XDECREF(params);
  Py_XDECREF(pt);
  Py_XDECREF(pg);
  PyGILState_Release(gil);
  return rc;
}
%}
%nothread ddp_py_comm_hook_custom;
%newobject ddp_py_comm_hook_custom;
%inline %{
/* The callable is kept for the life of the process: reducers and strategies
 * hold the hook past the Python object's life. */
DdpCommHook *ddp_py_comm_hook_custom(PyObject *fn) {
  DdpCommHook *h = NULL;
  if (!PyCallable_Check(fn)) {
    ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "CommHook.custom: fn is not callable");
    return NULL;
  }
  Py_INCREF(fn);
  if (ddp_swig_check(ddp_comm_hook_custom(&h, ddp_py_hook_trampoline, fn))) Py_DECREF(fn);
  return h;
}
%}
%pythonappend DdpReducer::set_comm_hook %{
        self._hook = hook
%}

%pythonappend DdpGroup::all_reduce_async %{
    val._keep = t
%}
%pythonappend DdpGroup::broadcast_async %{
    val._keep = t
%}
%pythonappend DdpGroup::reduce_async %{
    val._keep = t
%}
%pythonappend DdpGroup::all_gather_async %{
    val._keep = t
%}
%pythonappend DdpGroup::all_gather_uneven_async %{
    val._keep = t
%}
/* The strategy's own group lives as long as the strategy object. */
%pythonappend DdpStrategy::group %{
    val._strategy = self
%}
%pythonappend DdpOptimizer::sgd_groups %{
    val._module = module
%}
%pythonappend DdpOptimizer::adam_groups %{
    val._module = module
%}
%pythonappend DdpOptimizer::adamw_groups %{
    val._module = module
%}
%pythonappend DdpLrScheduler::sequential %{
    val._keep = (optimizer, list(SCHEDULERS))
%}

/* ---- the caller's own optimizer step: a Python callable ----------------------
 * Strategy.optimizer_step_fn(fn): the precision's step around fn() (e.g. a
 * torch optimizer's step over parameters shared through from_dlpack), skipped
 * when the gradient scaler found an inf or NaN; returns whether fn ran. An
 * exception fn raises comes back out of the call unchanged. */
%{
typedef struct {
  PyObject *fn;
  PyObject *type, *value, *traceback; /* fn's exception, raised again after the C call */
} ddp_py_step_call;

static int ddp_py_step_trampoline(void *user) {
  ddp_py_step_call *call = (ddp_py_step_call *)user;
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = 0;
  PyObject *r = PyObject_CallNoArgs(call->fn);
  if (!r) {
    PyErr_Fetch(&call->type, &call->value, &call->traceback);
    ddp_error_set("the optimizer step function raised an exception");
    rc = 1;
  } else if (PyLong_Check(r)) {
    rc = (int)PyLong_AsLong(r); /* a C-style status: 0 is success */
  }
  Py_XDECREF(r);
  PyGILState_Release(gil);
  return rc;
}
%}
%extend DdpStrategy {
  bool optimizer_step_fn(PyObject *fn) {
    ddp_py_step_call call = {fn, NULL, NULL, NULL};
    int stepped = 0;
    ddp_status s = ddp_strategy_optimizer_step_fn($self, ddp_py_step_trampoline, &call, &stepped);
    if (call.type) {
      PyGILState_STATE gil = PyGILState_Ensure();
      PyErr_Restore(call.type, call.value, call.traceback);
      PyGILState_Release(gil);
    }
    ddp_swig_check(s);
    return stepped != 0;
  }
}

/* ---- checkpoint IO and the cluster environment as Python objects -----------
 * Lightning's CheckpointIO (save(path, data), load(path) -> bytes,
 * remove(path)) and ClusterEnvironment (world_size(), global_rank(),
 * local_rank(), local_world_size(), node_rank(), main_address, main_port:
 * methods or attributes) written in Python, set on a StrategyOptions by
 * libddp.strategy(checkpoint_io=..., cluster_environment=...). The C API
 * copies the tables; the objects are kept for the life of the process, as
 * a strategy may call them until it is freed. A raising method fails the
 * strategy's call (DDP_E_IO naming the callback for checkpoint IO,
 * DDP_E_INVALID_ARGUMENT for the environment) after its traceback is printed. */
%{
typedef struct {
  ddp_cluster_callbacks table;
  PyObject *env;
  char address[256]; /* main_address's value, which the C API copies at once */
} ddp_py_cluster;

/* obj.name, called when it is a method; a new reference, or NULL with the traceback printed. */
static PyObject *ddp_py_member(PyObject *obj, const char *name) {
  PyObject *v = PyObject_GetAttrString(obj, name);
  if (v && PyCallable_Check(v)) {
    PyObject *r = PyObject_CallNoArgs(v);
    Py_DECREF(v);
    v = r;
  }
  if (!v) PyErr_Print();
  return v;
}

static int ddp_py_cluster_int(void *user, const char *name) {
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *v = ddp_py_member(((ddp_py_cluster *)user)->env, name);
  long r = v ? PyLong_AsLong(v) : -1;
  if (PyErr_Occurred()) {
    PyErr_Print();
    r = -1;
  }
  Py_XDECREF(v);
  PyGILState_Release(gil);
  return r < 0 || r > INT_MAX ? -1 : (int)r;
}
static int ddp_py_cluster_world_size(void *u) { return ddp_py_cluster_int(u, "world_size"); }
static int ddp_py_cluster_global_rank(void *u) { return ddp_py_cluster_int(u, "global_rank"); }
static int ddp_py_cluster_local_rank(void *u) { return ddp_py_cluster_int(u, "local_rank"); }
static int ddp_py_cluster_local_world_size(void *u) { return ddp_py_cluster_int(u, "local_world_size"); }
static int ddp_py_cluster_node_rank(void *u) { return ddp_py_cluster_int(u, "node_rank"); }
static int ddp_py_cluster_main_port(void *u) { return ddp_py_cluster_int(u, "main_port"); }
static const char *ddp_py_cluster_main_address(void *user) {
  ddp_py_cluster *c = (ddp_py_cluster *)user;
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject *v = ddp_py_member(c->env, "main_address");
  const char *utf = v ? PyUnicode_AsUTF8(v) : NULL;
  const char *out = NULL;
  if (utf && strlen(utf) < sizeof c->address) {
    strcpy(c->address, utf);
    out = c->address;
  }
  if (PyErr_Occurred()) PyErr_Print();
  Py_XDECREF(v);
  PyGILState_Release(gil);
  return out;
}

/* A method of the checkpoint IO object: 0, or 1 with the traceback printed. */
static int ddp_py_io_done(PyObject *r) {
  if (r) {
    Py_DECREF(r);
    return 0;
  }
  PyErr_Print();
  return 1;
}
static int ddp_py_io_save(void *user, const char *path, const void *data, size_t len) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = ddp_py_io_done(PyObject_CallMethod((PyObject *)user, "save", "sy#", path, (const char *)data, (Py_ssize_t)len));
  PyGILState_Release(gil);
  return rc;
}
static int ddp_py_io_remove(void *user, const char *path) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = ddp_py_io_done(PyObject_CallMethod((PyObject *)user, "remove", "s", path));
  PyGILState_Release(gil);
  return rc;
}
static int ddp_py_io_load(void *user, const char *path, ddp_byte_sink *sink) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = 1;
  PyObject *r = PyObject_CallMethod((PyObject *)user, "load", "s", path);
  Py_buffer view;
  if (r && PyObject_GetBuffer(r, &view, PyBUF_C_CONTIGUOUS) == 0) {
    rc = ddp_byte_sink_write(sink, view.buf, (size_t)view.len) == DDP_OK ? 0 : 1;
    PyBuffer_Release(&view);
  }
  if (PyErr_Occurred()) PyErr_Print(); /* load raised, or returned something that is not bytes-like */
  Py_XDECREF(r);
  PyGILState_Release(gil);
  return rc;
}
%}
%nothread ddp_py_set_checkpoint_io;
%nothread ddp_py_set_cluster_environment;
%inline %{
void ddp_py_set_checkpoint_io(ddp_strategy_options *options, PyObject *io) {
  ddp_checkpoint_io *table = (ddp_checkpoint_io *)calloc(1, sizeof *table);
  if (!table) { ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding"); return; }
  Py_INCREF(io);
  table->user_data = io;
  table->save = ddp_py_io_save;
  table->load = ddp_py_io_load;
  table->remove = ddp_py_io_remove;
  options->checkpoint_io = table;
}
void ddp_py_set_cluster_environment(ddp_strategy_options *options, PyObject *env) {
  ddp_py_cluster *c = (ddp_py_cluster *)calloc(1, sizeof *c);
  if (!c) { ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding"); return; }
  Py_INCREF(env);
  c->env = env;
  c->table.user_data = c;
  c->table.world_size = ddp_py_cluster_world_size;
  c->table.global_rank = ddp_py_cluster_global_rank;
  c->table.local_rank = ddp_py_cluster_local_rank;
  c->table.local_world_size = ddp_py_cluster_local_world_size;
  c->table.node_rank = ddp_py_cluster_node_rank;
  c->table.main_address = ddp_py_cluster_main_address;
  c->table.main_port = ddp_py_cluster_main_port;
  options->cluster_callbacks = &c->table;
}
%}
