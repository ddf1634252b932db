/*
 * One SWIG interface for every language (GDAL's layout): the handles of the
 * C API become classes that free themselves, a non-OK status becomes an
 * exception carrying the status and the message, and each language's file
 * (python/ddp_python.i, java/ddp_java.i) maps buffers, arrays and
 * callbacks. No algorithm lives here: every method is one C API call.
 */
%module(package="libddp") ddp

%{
#include <stdbool.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <ddp/ddp.h>

/* The proxy classes' C names: SWIG names its helpers <type>_<method>,
 * which for ddp_group would collide with the C API's own functions. */
typedef ddp_tensor DdpTensor;
typedef ddp_group DdpGroup;
typedef ddp_comm_hook DdpCommHook;
typedef ddp_reducer DdpReducer;
typedef ddp_model_averager DdpModelAverager;
typedef ddp_worker DdpWorker;
typedef ddp_module DdpModule;
typedef ddp_optimizer DdpOptimizer;
typedef ddp_strategy DdpStrategy;
typedef ddp_lr_scheduler DdpLrScheduler;
typedef ddp_work DdpWork;
typedef ddp_env DdpEnv;

/* Results of several values; each language's file maps them (a list or
 * array of Tensors, bytes). */
typedef struct { DdpTensor **items; int n; } DdpTensorArray;
typedef struct { ddp_buffer *buf; } DdpBytes;

/* The status of the wrapped call, set by ddp_swig_check; each language's
 * %exception turns a non-OK one into an exception right after the call. */
static __thread ddp_status ddp_swig_status = 0;
static int ddp_swig_check(ddp_status s) {
  ddp_swig_status = s;
  return s != DDP_OK;
}
/* A refusal the binding makes itself (of what the C API cannot see), with
 * its own message: the thread's last message is another call's. */
static int ddp_swig_fail(ddp_status s, const char *message) {
  ddp_error_set(message);
  return ddp_swig_check(s);
}
%}

%include "surface_helpers.i"

%include <stdint.i>

%nodefaultctor;
%nodefaultdtor;


/* ---- constants ---------------------------------------------------------- */
%rename("%(strip:[DDP_])s", %$isconstant) "";
%rename("%(strip:[DDP_])s", %$isenumitem) "";
%rename(DType) ddp_dtype;
%rename(ReduceOp) ddp_reduce_op;
%rename(StartMethod) ddp_start_method;
typedef int32_t ddp_status;
enum {
  DDP_OK = 0, DDP_E_INVALID_ARGUMENT = -1, DDP_E_STATE = -2, DDP_E_TIMEOUT = -3, DDP_E_PEER_FAILED = -4,
  DDP_E_BACKEND = -5, DDP_E_NOMEM = -6, DDP_E_UNSUPPORTED = -7, DDP_E_IO = -8, DDP_E_INTERNAL = -9,
  DDP_E_WORKER_FAILED = -10
};
typedef enum ddp_dtype {
  DDP_FLOAT32 = 0, DDP_FLOAT64 = 1, DDP_FLOAT16 = 2, DDP_BFLOAT16 = 3, DDP_INT8 = 4,
  DDP_UINT8 = 5, DDP_INT32 = 6, DDP_INT64 = 7, DDP_BOOL = 8
} ddp_dtype;
typedef enum ddp_reduce_op { DDP_SUM = 0, DDP_MEAN = 1, DDP_MIN = 2, DDP_MAX = 3, DDP_PRODUCT = 4 } ddp_reduce_op;
typedef enum ddp_start_method { DDP_START_POPEN = 0, DDP_START_FORK = 1 } ddp_start_method;

#if defined(SWIGJAVA)
%rename(versionString) ddp_version_string;
%rename(statusString) ddp_status_string;
%rename(dtypeSize) ddp_dtype_size;
#else
%rename(version_string) ddp_version_string;
%rename(status_string) ddp_status_string;
%rename(dtype_size) ddp_dtype_size;
#endif
const char *ddp_version_string(void);
const char *ddp_status_string(ddp_status status);
/* An element's bytes (4 for FLOAT32); 0 for an unknown dtype. */
size_t ddp_dtype_size(ddp_dtype dtype);

/* ---- the language's own mappings ----------------------------------------- */
#if defined(SWIGPYTHON)
%include "python/ddp_python.i"
#elif defined(SWIGJAVA)
%include "java/ddp_java.i"
#endif

/* The language's typemaps under the parameter names the methods use. SWIG
 * binds an %extend method's typemaps where its class is declared (below),
 * so these come first. */
%apply (const int64_t *SHAPE, size_t NDIM) { (const int64_t *dims, size_t ndims) };             /* reduction dims */
%apply (const int64_t *SHAPE, size_t NDIM) { (const int64_t *milestones, size_t num_milestones) }; /* SequentialLR */
%apply (DdpTensor **TENSORS, size_t NTENSORS) { (DdpTensor **kw_values, size_t num_kw) };       /* keyword inputs */
%apply char **STRING_ARRAY { char **kw_names };
%apply char **STRING_ARRAY { char **patterns };  /* a parameter group's name patterns */
%apply char **STRING_ARRAY { char **prefixes };  /* one checkpoint prefix per module */

/* ---- handles -------------------------------------------------------------
 * Each is an opaque C struct; SWIG sees an empty one and the %extend blocks
 * give it its constructor, destructor and methods. */

%rename(Tensor) DdpTensor;
typedef struct {} DdpTensor;
%rename(Group) DdpGroup;
typedef struct {} DdpGroup;
%rename(CommHook) DdpCommHook;
typedef struct {} DdpCommHook;
%rename(Reducer) DdpReducer;
typedef struct {} DdpReducer;
%rename(ModelAverager) DdpModelAverager;
typedef struct {} DdpModelAverager;
#if defined(SWIGJAVA)
%rename(ScriptModule) DdpModule;  /* java.lang.Module would shadow "Module" */
#else
%rename(Module) DdpModule;
#endif
typedef struct {} DdpModule;
%rename(Optimizer) DdpOptimizer;
typedef struct {} DdpOptimizer;
%rename(Strategy) DdpStrategy;
typedef struct {} DdpStrategy;
%rename(LrScheduler) DdpLrScheduler;
typedef struct {} DdpLrScheduler;
%rename(Work) DdpWork;
typedef struct {} DdpWork;
%rename(Env) DdpEnv;
typedef struct {} DdpEnv;

%include "options.i"

%newobject DdpTensor::zeros;
%newobject DdpTensor::wrap;
%newobject DdpTensor::from_aten_address;
%newobject DdpModule::from_tensors;
%newobject DdpGroup::new_subgroups;
%newobject DdpGroup::all_gather;
%newobject DdpReducer::gradient;
%newobject DdpReducer::bucket_indices;
%newobject DdpCommHook::allreduce;
%newobject DdpCommHook::fp16_compress;
%newobject DdpCommHook::bf16_compress;
%newobject DdpCommHook::noop;
%newobject DdpCommHook::wrap_fp16;
%newobject DdpCommHook::wrap_bf16;
%newobject DdpCommHook::powersgd;
%newobject DdpCommHook::post_localsgd;
%newobject DdpModule::load;
%newobject DdpModule::forward;
%newobject DdpOptimizer::sgd;
%newobject DdpOptimizer::adam;
%newobject DdpOptimizer::adamw;
%newobject DdpStrategy::forward;
%newobject DdpStrategy::all_gather;
%newobject DdpStrategy::from_options;
%newobject DdpGroup::all_reduce_async;
%newobject DdpGroup::broadcast_async;
%newobject DdpGroup::reduce_async;
%newobject DdpGroup::all_gather_async;
%newobject DdpGroup::all_gather_into_tensor_async;
%newobject DdpGroup::barrier_async;
%newobject DdpGroup::from_env;
%newobject DdpWork::result_tensor;
%newobject DdpEnv::detect;
%newobject DdpEnv::from_name;
%newobject DdpStrategy::resume_from_dir;
%newobject DdpTensor::from_dlpack_address;
%newobject DdpReducer::with_options;
%newobject DdpModule::get;
%newobject DdpModule::grad;
%newobject DdpOptimizer::sgd_with;
%newobject DdpOptimizer::adam_with;
%newobject DdpOptimizer::adamw_with;
%newobject DdpLrScheduler::DdpLrScheduler;
%newobject sampler_indices_with;
%newobject mse_loss;
%newobject cross_entropy_loss;
%newobject scale_loss;
%newobject sampler_indices;

%extend DdpTensor {
  /** A new zero tensor on the CPU. */
  static DdpTensor *zeros(ddp_dtype dtype, const int64_t *SHAPE, size_t NDIM) {
    DdpTensor *t = NULL;
    ddp_device cpu = DDP_DEVICE_CPU_INIT;
    ddp_swig_check(ddp_tensor_new(&t, dtype, SHAPE, NDIM, cpu));
    return t;
  }
  /** A view of the caller's memory (no copy); the binding keeps it alive. */
  static DdpTensor *wrap(void *BUFFER, size_t BUFLEN, ddp_dtype dtype, const int64_t *SHAPE, size_t NDIM) {
    DdpTensor *t = NULL;
    /* libddp checks the dtype and the shape (negative or overflowing
       sizes) and counts the bytes; no memory is read before the length
       below matches. */
    if (ddp_swig_check(ddp_tensor_from_blob(&t, BUFFER, dtype, SHAPE, NDIM))) return NULL;
    if (ddp_tensor_nbytes(t) != BUFLEN) {
      ddp_tensor_free(t);
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "Tensor.wrap: the buffer's length is not the shape's elements times the dtype's size");
      return NULL;
    }
    return t;
  }
  /** A tensor of the caller's own LibTorch binding (JavaCPP's presets:
   * tensor.address()), by the address of its at::Tensor: shared, never
   * copied. Refused (UNSUPPORTED, naming both) unless torch_version has the
   * major.minor of the LibTorch libddp was built against (torch_version()). */
  static DdpTensor *from_aten_address(long long address, const char *torch_version) {
    DdpTensor *t = NULL;
    if (ddp_swig_check(ddp_torch_check_version(torch_version))) return NULL;
    ddp_swig_check(ddp_tensor_from_aten(&t, (const void *)(intptr_t)address));
    return t;
  }
  /** The version of the LibTorch libddp was built against (major.minor.patch). */
  static const char *torch_version() { return ddp_torch_version(); }
  /** A tensor over a DLManagedTensor's memory (dlpack.h), which it takes
   * over; each language's file turns its DLPack objects into the address. */
  static DdpTensor *from_dlpack_address(long long address) {
    DdpTensor *t = NULL;
    ddp_swig_check(ddp_tensor_from_dlpack(&t, (void *)(intptr_t)address));
    return t;
  }
  /** A new DLManagedTensor sharing this tensor's memory, by address; the
   * consumer owns it. */
  long long to_dlpack_address() {
    void *managed = NULL;
    ddp_swig_check(ddp_tensor_to_dlpack($self, &managed));
    return (long long)(intptr_t)managed;
  }
  /** The first element's address: the same for a tensor and its views. */
  long long data_address() { return (long long)(intptr_t)ddp_tensor_data($self); }
  /** True when the tensor lives on a CUDA device. */
  bool is_cuda() { return ddp_tensor_device($self).type == DDP_DEVICE_CUDA; }
  /** The CUDA device's index (0 for a CPU tensor). */
  int device_index() { return ddp_tensor_device($self).index; }
  ~DdpTensor() { ddp_tensor_free($self); }
  /** The element type. */
  ddp_dtype dtype() { return ddp_tensor_dtype($self); }
  /** The number of dimensions (0 for a scalar). */
  size_t ndim() { return ddp_tensor_ndim($self); }
  /** The size of dimension i; -1 when i >= ndim(). */
  int64_t dim_size(size_t i) { return i < ddp_tensor_ndim($self) ? ddp_tensor_shape($self)[i] : -1; }
  /** The number of elements. */
  int64_t numel() { return ddp_tensor_numel($self); }
  /** The size of the elements in bytes (numel() times the element size). */
  size_t nbytes() { return ddp_tensor_nbytes($self); }
  /** Copies the tensor's bytes into the caller's buffer, which must hold nbytes() bytes. */
  void copy_to(void *BUFFER, size_t BUFLEN) { ddp_swig_check(ddp_tensor_copy_to($self, BUFFER, BUFLEN)); }
  /** Copies nbytes() bytes from the caller's buffer into the tensor. */
  void copy_from(const void *CBUFFER, size_t CBUFLEN) { ddp_swig_check(ddp_tensor_copy_from($self, CBUFFER, CBUFLEN)); }
}

%extend DdpGroup {
  /** rank < 0: everything from the environment (torchrun, SLURM, ...). */
  DdpGroup(int rank = -1, int world_size = 1, const char *master_addr = "127.0.0.1", int master_port = 0,
            const char *backend = NULL, long long timeout_ms = 0) {
    ddp_env *env = NULL;
    DdpGroup *g = NULL;
    ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
    o.backend = backend;
    o.timeout_ms = timeout_ms;
    if (rank >= 0 && ddp_swig_check(ddp_env_new(&env, rank, world_size, rank, world_size, 0, master_addr, master_port)))
      return NULL;
    ddp_swig_check(ddp_group_init(&g, env, &o));
    ddp_env_free(env);
    return g;
  }
  ~DdpGroup() { ddp_group_free($self); }
  /** This process's rank in the group. */
  int rank() { return ddp_group_rank($self); }
  /** The number of ranks in the group. */
  int size() { return ddp_group_size($self); }
  /** The backend the group runs on: "shm", "gloo" or "nccl" (shm falls back to gloo where it cannot share). */
  const char *backend() { return ddp_group_backend($self); }
  /** The timeout of each collective, in milliseconds. */
  long long timeout_ms() { return ddp_group_timeout_ms($self); }
  /** torch.distributed's new_subgroups: consecutive ranks in groups of group_size (0: one per node); returns this rank's. Collective. */
  DdpGroup *new_subgroups(int group_size) {
    DdpGroup *sub = NULL;
    ddp_swig_check(ddp_group_new_subgroups($self, group_size, &sub));
    return sub;
  }
  /** Blocks until every rank of the group has called it. */
  void barrier() { ddp_swig_check(ddp_barrier($self)); }
  /** In place: every rank's t combined with op (DDP_MEAN averages). */
  void all_reduce(DdpTensor *t, ddp_reduce_op op = DDP_SUM) { ddp_swig_check(ddp_all_reduce($self, t, op)); }
  /** Rank dst receives every rank's t combined with op; the others' t are left as they were. */
  void reduce(DdpTensor *t, int dst, ddp_reduce_op op = DDP_SUM) { ddp_swig_check(ddp_reduce($self, t, dst, op)); }
  /** Rank src's t into every rank's t. */
  void broadcast(DdpTensor *t, int src = 0) { ddp_swig_check(ddp_broadcast($self, t, src)); }
  /** Every rank's t stacked along a new first dimension (world x t's shape), the same on every rank. */
  DdpTensor *all_gather(const DdpTensor *t) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_all_gather($self, t, &out));
    return out;
  }
  /** PyTorch's all_gather_into_tensor: into the caller's out (world x numel(t) elements). */
  void all_gather_into_tensor(const DdpTensor *t, DdpTensor *out) {
    ddp_swig_check(ddp_all_gather_into_tensor($self, t, out));
  }
  /** Lightning's gather_all_tensors: one tensor per rank, sizes may differ. */
  DdpTensorArray all_gather_uneven(const DdpTensor *t) {
    DdpTensorArray out = {NULL, ddp_group_size($self)};
    out.items = (DdpTensor **)calloc(out.n > 0 ? (size_t)out.n : 1, sizeof(DdpTensor *));
    if (ddp_swig_check(ddp_all_gather_uneven($self, t, out.items))) {
      free(out.items);
      out.items = NULL;
    }
    return out;
  }
  /** Lightning's broadcast(obj), as bytes. */
  DdpBytes broadcast_bytes(const void *CBUFFER, size_t CBUFLEN, int src = 0) {
    DdpBytes out = {NULL};
    ddp_swig_check(ddp_broadcast_bytes($self, CBUFFER, CBUFLEN, src, &out.buf));
    return out;
  }
  /** Lightning's reduce_boolean_decision: true when every rank (all) or any rank (not all) decided true. */
  bool reduce_boolean_decision(bool decision, bool all = true) {
    int out = 0;
    ddp_swig_check(ddp_reduce_boolean_decision($self, decision, all, &out));
    return out != 0;
  }
  /** A group over an Env's values (backend NULL: the default for the CPU). */
  static DdpGroup *from_env(const DdpEnv *env, const char *backend = NULL, long long timeout_ms = 0) {
    DdpGroup *g = NULL;
    ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
    o.backend = backend;
    o.timeout_ms = timeout_ms;
    ddp_swig_check(ddp_group_init(&g, env, &o));
    return g;
  }
  /** The collectives without waiting: each returns a Work to wait on (in the
   * order they were started), the tensor kept alive until then. */
  DdpWork *all_reduce_async(DdpTensor *t, ddp_reduce_op op = DDP_SUM) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_all_reduce_async($self, t, op, &w));
    return w;
  }
  /** broadcast without waiting. */
  DdpWork *broadcast_async(DdpTensor *t, int src = 0) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_broadcast_async($self, t, src, &w));
    return w;
  }
  /** reduce without waiting. */
  DdpWork *reduce_async(DdpTensor *t, int dst, ddp_reduce_op op = DDP_SUM) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_reduce_async($self, t, dst, op, &w));
    return w;
  }
  /** all_gather without waiting: Work.result_tensor() after wait. */
  DdpWork *all_gather_async(const DdpTensor *t) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_all_gather_async($self, t, &w));
    return w;
  }
  /** all_gather_into_tensor without waiting: out is written by the time wait returns. */
  DdpWork *all_gather_into_tensor_async(const DdpTensor *t, DdpTensor *out) {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_all_gather_into_tensor_async($self, t, out, &w));
    return w;
  }
  /** barrier without waiting. */
  DdpWork *barrier_async() {
    DdpWork *w = NULL;
    ddp_swig_check(ddp_barrier_async($self, &w));
    return w;
  }
}

%extend DdpWork {
  ~DdpWork() { ddp_work_free($self); }
  /** timeout_ms < 0: the group's timeout. Running out of time raises
   * E_TIMEOUT and breaks the group (the collective cannot resume). */
  void wait(long long timeout_ms = -1) { ddp_swig_check(ddp_work_wait($self, timeout_ms)); }
  /** True once the collective finished (successfully or not), without waiting. */
  bool is_completed() {
    int out = 0;
    ddp_swig_check(ddp_work_is_completed($self, &out));
    return out != 0;
  }
  /** How many result tensors a waited collective has (all_gather: 1, all_gather_uneven: world size). */
  size_t result_count() { return ddp_work_result_count($self); }
  /** Result index of a waited all_gather. */
  DdpTensor *result_tensor(size_t index = 0) {
    DdpTensor *t = NULL;
    ddp_swig_check(ddp_work_result_tensor($self, index, &t));
    return t;
  }
}

/* One process's place in a job, as a launcher or cluster gives it. */
%extend DdpEnv {
  /** TorchElastic > SLURM > LSF > MPI > Lightning's variables. */
  static DdpEnv *detect() { DdpEnv *e = NULL; ddp_swig_check(ddp_env_detect(&e)); return e; }
  /** "torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow". */
  static DdpEnv *from_name(const char *name) { DdpEnv *e = NULL; ddp_swig_check(ddp_env_from_name(&e, name)); return e; }
  DdpEnv(int rank, int world_size, int local_rank, int local_world_size, int node_rank, const char *master_addr = NULL,
         int master_port = 0) {
    DdpEnv *e = NULL;
    ddp_swig_check(ddp_env_new(&e, rank, world_size, local_rank, local_world_size, node_rank, master_addr, master_port));
    return e;
  }
  ~DdpEnv() { ddp_env_free($self); }
  /** Which environment the values came from ("torchelastic", "slurm", "lightning", ...). */
  const char *name() { return ddp_env_name($self); }
  /** The global rank. */
  int rank() { return ddp_env_rank($self); }
  /** The number of processes in the job. */
  int world_size() { return ddp_env_world_size($self); }
  /** The rank among the processes of this node. */
  int local_rank() { return ddp_env_local_rank($self); }
  /** The number of processes on this node. */
  int local_world_size() { return ddp_env_local_world_size($self); }
  /** This node's index. */
  int node_rank() { return ddp_env_node_rank($self); }
  /** The address of the rendezvous store (rank 0's host). */
  const char *master_addr() { return ddp_env_master_addr($self); }
  /** The port of the rendezvous store. */
  int master_port() { return ddp_env_master_port($self); }
}

%extend DdpCommHook {
  /** PyTorch's allreduce_hook: the bucket's average. */
  static DdpCommHook *allreduce() { DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_allreduce(&h)); return h; }
  /** PyTorch's fp16_compress_hook: the bucket all-reduced in float16 and cast back. */
  static DdpCommHook *fp16_compress() { DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_fp16_compress(&h)); return h; }
  /** PyTorch's bf16_compress_hook: the bucket all-reduced in bfloat16 and cast back. */
  static DdpCommHook *bf16_compress() { DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_bf16_compress(&h)); return h; }
  /** PyTorch's noop_hook: no communication (the gradients stay each rank's own). */
  static DdpCommHook *noop() { DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_noop(&h)); return h; }
  /** PyTorch's fp16_compress_wrapper: inner runs on the bucket cast to float16. */
  static DdpCommHook *wrap_fp16(const DdpCommHook *inner) {
    DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_wrap_fp16(&h, inner)); return h;
  }
  /** PyTorch's bf16_compress_wrapper: inner runs on the bucket cast to bfloat16. */
  static DdpCommHook *wrap_bf16(const DdpCommHook *inner) {
    DdpCommHook *h = NULL; ddp_swig_check(ddp_comm_hook_wrap_bf16(&h, inner)); return h;
  }
  /** PyTorch's PowerSGDState arguments and defaults. */
  static DdpCommHook *powersgd(int matrix_approximation_rank = 1, long long start_powersgd_iter = 1000,
                                 double min_compression_rate = 2, bool use_error_feedback = true,
                                 bool warm_start = true, double orthogonalization_epsilon = 0,
                                 unsigned int random_seed = 0, bool batch_tensors_with_same_shape = false,
                                 bool batched = false) {
    ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
    DdpCommHook *h = NULL;
    o.matrix_approximation_rank = matrix_approximation_rank;
    o.start_powersgd_iter = start_powersgd_iter;
    o.min_compression_rate = min_compression_rate;
    o.use_error_feedback = use_error_feedback;
    o.warm_start = warm_start;
    o.orthogonalization_epsilon = orthogonalization_epsilon;
    o.random_seed = random_seed;
    o.batch_tensors_with_same_shape = batch_tensors_with_same_shape;
    o.batched = batched;
    ddp_swig_check(ddp_comm_hook_powersgd(&h, &o));
    return h;
  }
  /** subgroup NULL: one per node. */
  static DdpCommHook *post_localsgd(DdpGroup *subgroup, long long start_localsgd_iter,
                                      bool post_local_gradient_allreduce = true) {
    DdpCommHook *h = NULL;
    ddp_swig_check(ddp_comm_hook_post_localsgd(&h, subgroup, start_localsgd_iter, post_local_gradient_allreduce));
    return h;
  }
  ~DdpCommHook() { ddp_comm_hook_free($self); }
  /** (numel before, numel after, iteration) of a PowerSGD hook. */
  void compression_stats(long long *OUT_BEFORE, long long *OUT_AFTER, long long *OUT_ITER) {
    ddp_compression_stats s = {0, 0, 0};
    ddp_swig_check(ddp_comm_hook_compression_stats($self, &s));
    *OUT_BEFORE = (long long)s.numel_before;
    *OUT_AFTER = (long long)s.numel_after;
    *OUT_ITER = (long long)s.iteration;
  }
}

%extend DdpReducer {
  /** Over caller-owned gradient buffers (tensors from Tensor.wrap). */
  DdpReducer(DdpGroup *group, DdpTensor **TENSORS, size_t NTENSORS, double bucket_cap_mb = 25,
              double first_bucket_mb = 1, bool find_unused_parameters = false) {
    DdpReducer *r = NULL;
    ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
    o.bucket_cap_mb = bucket_cap_mb;
    o.first_bucket_mb = first_bucket_mb;
    o.find_unused_parameters = find_unused_parameters;
    o.broadcast_parameters = 0;
    ddp_swig_check(ddp_reducer_new(&r, group, NULL, TENSORS, NTENSORS, &o));
    return r;
  }
  /** Every option of ddp_reducer_options (broadcast_parameters, join_enabled, ...). */
  static DdpReducer *with_options(DdpGroup *group, DdpTensor **TENSORS, size_t NTENSORS, const ddp_reducer_options *options) {
    DdpReducer *r = NULL;
    ddp_swig_check(ddp_reducer_new(&r, group, NULL, TENSORS, NTENSORS, options));
    return r;
  }
  ~DdpReducer() { ddp_reducer_free($self); }
  /** The gradient at index is final for this step: its bucket is all-reduced once all its gradients are. */
  void mark_ready(size_t index) { ddp_swig_check(ddp_reducer_mark_ready($self, index)); }
  /** Waits for every bucket of the step and writes the averaged gradients back. */
  void finish() { ddp_swig_check(ddp_reducer_finish($self)); }
  /** no_sync: while false, gradients accumulate locally and nothing is reduced. */
  void set_sync(bool enabled) { ddp_swig_check(ddp_reducer_set_sync($self, enabled)); }
  /** PyTorch's Join: this rank is out of inputs; it shadows the others' collectives until all are. */
  void join() { ddp_swig_check(ddp_reducer_join($self)); }
  /** The hook that reduces each bucket from now on (before the first step). */
  void set_comm_hook(const DdpCommHook *hook) { ddp_swig_check(ddp_reducer_set_comm_hook($self, hook)); }
  /** The number of gradient buckets. */
  size_t bucket_count() { return ddp_reducer_bucket_count($self); }
  /** The gradient buffer of parameter index (with gradient_as_bucket_view:
   * its view into the bucket's storage). */
  DdpTensor *gradient(size_t index) {
    DdpTensor *t = NULL;
    ddp_swig_check(ddp_reducer_gradient($self, index, &t));
    return t;
  }
  /** The parameter indices of a bucket, in bucket order (an int64 tensor). */
  DdpTensor *bucket_indices(size_t bucket) {
    size_t count = 0;
    DdpTensor *t = NULL;
    ddp_device cpu = DDP_DEVICE_CPU_INIT;
    if (ddp_swig_check(ddp_reducer_bucket_indices($self, bucket, NULL, 0, &count))) return NULL;
    size_t *idx = (size_t *)malloc((count ? count : 1) * sizeof(size_t));
    int64_t *wide = (int64_t *)malloc((count ? count : 1) * sizeof(int64_t));
    int64_t shape[1] = {(int64_t)count};
    if (!idx || !wide) {
      ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding");
    } else if (!ddp_swig_check(ddp_reducer_bucket_indices($self, bucket, idx, count, &count))) {
      for (size_t i = 0; i < count; ++i) wide[i] = (int64_t)idx[i];
      if (!ddp_swig_check(ddp_tensor_new(&t, DDP_INT64, shape, 1, cpu)) &&
          ddp_swig_check(ddp_tensor_copy_from(t, wide, count * sizeof(int64_t)))) {
        ddp_tensor_free(t);
        t = NULL;
      }
    }
    free(idx);
    free(wide);
    return t;
  }
}

/* Inside a worker of spawn (each language's file provides spawn itself). */
%rename(Worker) DdpWorker;
typedef struct {} DdpWorker;
%extend DdpWorker {
  /** This worker's global rank. */
  int rank() { return ddp_worker_rank($self); }
  /** The number of workers spawn started. */
  int world_size() { return ddp_worker_world_size($self); }
  /** This worker's rank on its node. */
  int local_rank() { return ddp_worker_local_rank($self); }
  /** On rank 0: what spawn returns to the launching program. */
  void set_result(const void *CBUFFER, size_t CBUFLEN) { ddp_swig_check(ddp_worker_set_result($self, CBUFFER, CBUFLEN)); }
}

%extend DdpModelAverager {
  DdpModelAverager(DdpGroup *group, long long period, long long warmup_steps = 0) {
    DdpModelAverager *a = NULL;
    ddp_swig_check(ddp_model_averager_new(&a, group, period, warmup_steps));
    return a;
  }
  ~DdpModelAverager() { ddp_model_averager_free($self); }
  /** One optimizer step: every period steps after warmup_steps, the tensors (parameters) are averaged over the group in place. */
  void step(DdpTensor **TENSORS, size_t NTENSORS) { ddp_swig_check(ddp_model_averager_step($self, TENSORS, NTENSORS)); }
}

/* ---- training: TorchScript modules, LibTorch's optimizers, losses, the
 * sampler and the strategy (model.h, sampler.h, strategy.h) -------------- */

%extend DdpModule {
  /** A TorchScript module saved by torch.jit.save. */
  static DdpModule *load(const char *path) { DdpModule *m = NULL; ddp_swig_check(ddp_module_load(&m, path)); return m; }
  ~DdpModule() { ddp_module_free($self); }
  /** The module's forward on one input tensor. */
  DdpTensor *forward(const DdpTensor *input) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_module_forward($self, input, &out));
    return out;
  }
  /** Training mode (dropout, batch norm statistics) on or off, as torch.nn.Module.train. */
  void train(bool on = true) { ddp_swig_check(ddp_module_train($self, on)); }
  /** The number of parameter tensors. */
  size_t num_parameters() { return ddp_module_num_parameters($self); }
  /** TorchScript, for torch.jit.load. */
  void save(const char *path) { ddp_swig_check(ddp_module_save($self, path)); }
  /** torch.save(module.state_dict()) format. */
  void save_state_dict(const char *path) { ddp_swig_check(ddp_module_save_state_dict($self, path)); }
  /** Loads a state_dict saved by torch.save(module.state_dict()); strict: every key must match. */
  void load_state_dict(const char *path, bool strict = true) {
    ddp_swig_check(ddp_module_load_state_dict($self, path, strict));
  }
  /** Parameters and buffers, by index: their count, names and kinds. */
  size_t state_count() { return ddp_module_state_count($self); }
  /** The name of the parameter or buffer at index ("layer.weight"). */
  const char *state_name(size_t index) {
    const char *name = NULL;
    int is_parameter = 0;
    ddp_swig_check(ddp_module_state_name($self, index, &name, &is_parameter));
    return name;
  }
  /** True for a parameter, false for a buffer. */
  bool state_is_parameter(size_t index) {
    const char *name = NULL;
    int is_parameter = 0;
    ddp_swig_check(ddp_module_state_name($self, index, &name, &is_parameter));
    return is_parameter != 0;
  }
  /** The parameter or buffer, sharing the module's memory. */
  DdpTensor *get(const char *name) {
    DdpTensor *t = NULL;
    ddp_swig_check(ddp_module_get($self, name, &t));
    return t;
  }
  /** Its gradient, sharing memory; None/null when it has none. */
  DdpTensor *grad(const char *name) {
    DdpTensor *t = NULL;
    ddp_swig_check(ddp_module_grad($self, name, &t));
    return t;
  }
  /** Replaces the parameter or buffer's values with value's; a different shape or dtype is refused, naming both. */
  void set(const char *name, const DdpTensor *value) { ddp_swig_check(ddp_module_set($self, name, value)); }
  /** A model made of the caller's tensors by name (ddp_module_from_tensors),
   * shared: the first tensors are its parameters, the last num_buffers its
   * buffers. The names are as many as the tensors. */
  static DdpModule *from_tensors(char **STRING_ARRAY, DdpTensor **TENSORS, size_t NTENSORS, size_t num_buffers) {
    DdpModule *m = NULL;
    size_t n = 0;
    while (STRING_ARRAY && STRING_ARRAY[n]) ++n;
    if (n != NTENSORS || num_buffers > NTENSORS) {
      ddp_swig_fail(DDP_E_INVALID_ARGUMENT, "Module.from_tensors: one name per tensor, and no more buffers than tensors");
      return NULL;
    }
    int *is_buffer = (int *)calloc(NTENSORS ? NTENSORS : 1, sizeof(int));
    for (size_t i = NTENSORS - num_buffers; i < NTENSORS; ++i) is_buffer[i] = 1;
    ddp_swig_check(ddp_module_from_tensors(&m, (const char *const *)STRING_ARRAY, TENSORS, is_buffer, NTENSORS));
    free(is_buffer);
    return m;
  }
}

%extend DdpOptimizer {
  /** torch.optim.SGD's arguments and defaults (lr aside). */
  static DdpOptimizer *sgd(DdpModule *module, double lr = 0.001, double momentum = 0, double dampening = 0,
                           double weight_decay = 0, bool nesterov = false) {
    ddp_sgd_options o = DDP_SGD_OPTIONS_INIT;
    DdpOptimizer *opt = NULL;
    o.lr = lr;
    o.momentum = momentum;
    o.dampening = dampening;
    o.weight_decay = weight_decay;
    o.nesterov = nesterov;
    ddp_swig_check(ddp_optimizer_new_sgd(&opt, module, &o));
    return opt;
  }
  static DdpOptimizer *adam(DdpModule *module, double lr = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                            double eps = 1e-8, double weight_decay = 0, bool amsgrad = false) {
    ddp_adam_options o = DDP_ADAM_OPTIONS_INIT;
    DdpOptimizer *opt = NULL;
    o.lr = lr; o.beta1 = beta1; o.beta2 = beta2; o.eps = eps; o.weight_decay = weight_decay; o.amsgrad = amsgrad;
    ddp_swig_check(ddp_optimizer_new_adam(&opt, module, &o));
    return opt;
  }
  static DdpOptimizer *adamw(DdpModule *module, double lr = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                             double eps = 1e-8, double weight_decay = 0.01, bool amsgrad = false) {
    ddp_adam_options o = DDP_ADAM_OPTIONS_INIT;
    DdpOptimizer *opt = NULL;
    o.lr = lr; o.beta1 = beta1; o.beta2 = beta2; o.eps = eps; o.weight_decay = weight_decay; o.amsgrad = amsgrad;
    ddp_swig_check(ddp_optimizer_new_adamw(&opt, module, &o));
    return opt;
  }
  /** Every option, from an options object. */
  static DdpOptimizer *sgd_with(DdpModule *module, const ddp_sgd_options *options) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_sgd(&opt, module, options));
    return opt;
  }
  /** torch.optim.Adam with every option from an options object. */
  static DdpOptimizer *adam_with(DdpModule *module, const ddp_adam_options *options) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_adam(&opt, module, options));
    return opt;
  }
  /** torch.optim.AdamW with every option from an options object. */
  static DdpOptimizer *adamw_with(DdpModule *module, const ddp_adam_options *options) {
    DdpOptimizer *opt = NULL;
    ddp_swig_check(ddp_optimizer_new_adamw(&opt, module, options));
    return opt;
  }
  ~DdpOptimizer() { ddp_optimizer_free($self); }
  /** The learning rate in effect (what a scheduler set); with groups, the first group's. */
  double lr() {
    double lr = 0;
    ddp_swig_check(ddp_optimizer_lr($self, &lr));
    return lr;
  }
  /** Sets the learning rate of every parameter group. */
  void set_lr(double lr) { ddp_swig_check(ddp_optimizer_set_lr($self, lr)); }
  /** Sets the gradients of the optimizer's parameters to None (PyTorch 2's default). */
  void zero_grad() { ddp_swig_check(ddp_optimizer_zero_grad($self)); }
}

/* torch.optim.lr_scheduler's schedulers over an optimizer (not SequentialLR
 * or MultiStepLR's milestones yet: the C API's ddp_lr_scheduler_new_sequential). */
%extend DdpLrScheduler {
  DdpLrScheduler(DdpOptimizer *optimizer, const ddp_lr_scheduler_options *options) {
    DdpLrScheduler *s = NULL;
    ddp_swig_check(ddp_lr_scheduler_new(&s, optimizer, options));
    return s;
  }
  ~DdpLrScheduler() { ddp_lr_scheduler_free($self); }
  /** One scheduler step (after the optimizer's step). */
  void step() { ddp_swig_check(ddp_lr_scheduler_step($self)); }
  /** ReduceLROnPlateau's step. */
  void step_metric(double metric) { ddp_swig_check(ddp_lr_scheduler_step_metric($self, metric)); }
  /** The learning rate the last step set. */
  double last_lr() {
    double lr = 0;
    ddp_swig_check(ddp_lr_scheduler_last_lr($self, &lr));
    return lr;
  }
}

%{
/* torch.nn.functional.mse_loss / cross_entropy (mean), and loss * factor. */
DdpTensor *mse_loss(const DdpTensor *input, const DdpTensor *target) {
  DdpTensor *out = NULL;
  ddp_swig_check(ddp_loss_mse(input, target, &out));
  return out;
}
DdpTensor *cross_entropy_loss(const DdpTensor *input, const DdpTensor *target) {
  DdpTensor *out = NULL;
  ddp_swig_check(ddp_loss_cross_entropy(input, target, &out));
  return out;
}
DdpTensor *scale_loss(const DdpTensor *loss, double factor) {
  DdpTensor *out = NULL;
  ddp_swig_check(ddp_loss_scale(loss, factor, &out));
  return out;
}
/* DistributedSampler's indices for one rank and epoch, as an int64 tensor. */
DdpTensor *sampler_indices(long long dataset_size, int num_replicas, int rank, long long epoch, bool shuffle,
                           long long seed, bool drop_last) {
  ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
  size_t count = 0;
  int64_t *idx = NULL;
  DdpTensor *t = NULL;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  o.shuffle = shuffle;
  o.seed = seed;
  o.drop_last = drop_last;
  if (ddp_swig_check(ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, &o, NULL, 0, &count))) return NULL;
  idx = (int64_t *)malloc((count ? count : 1) * sizeof(int64_t));
  if (!idx) { ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding"); return NULL; }
  int64_t shape[1] = {(int64_t)count};
  if (!ddp_swig_check(ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, &o, idx, count, &count)) &&
      !ddp_swig_check(ddp_tensor_new(&t, DDP_INT64, shape, 1, cpu)) &&
      ddp_swig_check(ddp_tensor_copy_from(t, idx, count * sizeof(int64_t)))) {
    ddp_tensor_free(t);
    t = NULL;
  }
  free(idx);
  return t;
}
/* The same with every sampler option (unrepeated, start). */
DdpTensor *sampler_indices_with(long long dataset_size, int num_replicas, int rank, long long epoch,
                                const ddp_sampler_options *options) {
  size_t count = 0;
  int64_t *idx = NULL;
  DdpTensor *t = NULL;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  if (ddp_swig_check(ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, options, NULL, 0, &count))) return NULL;
  idx = (int64_t *)malloc((count ? count : 1) * sizeof(int64_t));
  if (!idx) { ddp_swig_fail(DDP_E_NOMEM, "out of memory in the binding"); return NULL; }
  int64_t shape[1] = {(int64_t)count};
  if (!ddp_swig_check(ddp_sampler_indices(dataset_size, num_replicas, rank, epoch, options, idx, count, &count)) &&
      !ddp_swig_check(ddp_tensor_new(&t, DDP_INT64, shape, 1, cpu)) &&
      ddp_swig_check(ddp_tensor_copy_from(t, idx, count * sizeof(int64_t)))) {
    ddp_tensor_free(t);
    t = NULL;
  }
  free(idx);
  return t;
}
/* Samples per rank (DistributedSampler's num_samples). */
long long sampler_num_samples(long long dataset_size, int num_replicas, bool drop_last) {
  int64_t n = 0;
  ddp_swig_check(ddp_sampler_num_samples(dataset_size, num_replicas, drop_last, &n));
  return (long long)n;
}
%}
/* torch.nn.functional.mse_loss / cross_entropy (mean), and loss * factor. */
DdpTensor *mse_loss(const DdpTensor *input, const DdpTensor *target);
DdpTensor *cross_entropy_loss(const DdpTensor *input, const DdpTensor *target);
DdpTensor *scale_loss(const DdpTensor *loss, double factor);
/* DistributedSampler's indices for one rank and epoch, as an int64 tensor. */
DdpTensor *sampler_indices(long long dataset_size, int num_replicas, int rank, long long epoch, bool shuffle = true,
                           long long seed = 0, bool drop_last = false);
DdpTensor *sampler_indices_with(long long dataset_size, int num_replicas, int rank, long long epoch,
                                const ddp_sampler_options *options);
long long sampler_num_samples(long long dataset_size, int num_replicas, bool drop_last = false);

%extend DdpStrategy {
  /** Lightning's DDPStrategy options and defaults; devices: processes on
   * this node (the program starts the others itself unless a launcher did). */
  DdpStrategy(int devices = 1, const char *backend = NULL, long long timeout_ms = 0, double bucket_cap_mb = 25,
              double first_bucket_mb = 1, bool find_unused_parameters = false, bool broadcast_buffers = true,
              const DdpCommHook *comm_hook = NULL, long long model_averaging_period = 0,
              long long model_averaging_warmup = 0) {
    ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
    DdpStrategy *s = NULL;
    o.devices = devices;
    o.backend = backend;
    o.timeout_ms = timeout_ms;
    o.bucket_cap_mb = bucket_cap_mb;
    o.first_bucket_mb = first_bucket_mb;
    o.find_unused_parameters = find_unused_parameters;
    o.broadcast_buffers = broadcast_buffers;
    o.comm_hook = comm_hook;
    o.model_averaging_period = model_averaging_period;
    o.model_averaging_warmup = model_averaging_warmup;
    ddp_swig_check(ddp_strategy_new(&s, &o));
    return s;
  }
  /** Every DDPStrategy argument, from a StrategyOptions. */
  static DdpStrategy *from_options(const ddp_strategy_options *options) {
    DdpStrategy *s = NULL;
    ddp_swig_check(ddp_strategy_new(&s, options));
    return s;
  }
  ~DdpStrategy() { ddp_strategy_free($self); }
  /** The number of processes per node (after setup: what "auto" resolved to). */
  int devices() { return ddp_strategy_devices($self); }
  /** True when the root device is CUDA (accelerator cuda). */
  bool root_device_is_cuda() { return ddp_strategy_root_device($self).type == DDP_DEVICE_CUDA; }
  /** The root device's index: this rank's local rank on CUDA, 0 on the CPU. */
  int root_device_index() { return ddp_strategy_root_device($self).index; }
  /** The precision in use ("32-true", "bf16-mixed", ...), after Lightning's substitutions. */
  const char *precision() { return ddp_strategy_precision($self); }
  /** Lightning's warning about the precision ("" when none). */
  const char *precision_warning() { return ddp_strategy_precision_warning($self); }
  /** How many batch norm layers sync_batchnorm turned into synchronised ones at setup_module. */
  int sync_batchnorm_layers() { return ddp_strategy_sync_batchnorm_layers($self); }
  /** The module as TorchScript (torch.jit.load), from global rank 0; collective. */
  void save_module(const char *path, const DdpModule *module) { ddp_swig_check(ddp_strategy_save_module($self, path, module)); }
  /** Lightning's checkpoint with the counters of info; optimizer and
   * scheduler may be None/null. Collective. */
  void save_checkpoint_with(const char *path, const DdpModule *module, DdpOptimizer *optimizer,
                            DdpLrScheduler *scheduler, const ddp_checkpoint_info *info) {
    ddp_swig_check(ddp_strategy_save_checkpoint_v2($self, path, module, optimizer ? &optimizer : NULL, optimizer ? 1 : 0,
                                                   scheduler ? &scheduler : NULL, scheduler ? 1 : 0, info));
  }
  /** Every rank; the counters go into info. */
  void load_checkpoint_with(const char *path, DdpModule *module, DdpOptimizer *optimizer, DdpLrScheduler *scheduler,
                            ddp_checkpoint_info *info) {
    ddp_swig_check(ddp_strategy_load_checkpoint_v2($self, path, module, optimizer ? &optimizer : NULL, optimizer ? 1 : 0,
                                                   scheduler ? &scheduler : NULL, scheduler ? 1 : 0, info, NULL));
  }
  /** ModelCheckpoint(dirpath=dir, save_top_k=keep_last): dir/epoch=E-step=S.ckpt. */
  void save_checkpoint_to_dir(const char *dir, int keep_last, DdpModule *module, DdpOptimizer *optimizer,
                              DdpLrScheduler *scheduler, const ddp_checkpoint_info *info) {
    ddp_swig_check(ddp_strategy_save_checkpoint_to_dir($self, dir, keep_last, &module, NULL, 1,
                                                       optimizer ? &optimizer : NULL, optimizer ? 1 : 0,
                                                       scheduler ? &scheduler : NULL, scheduler ? 1 : 0, info));
  }
  /** Trainer.fit(ckpt_path="last"): the newest checkpoint in dir every rank
   * can load. Returns the report ("resumed from PATH", after a line for each
   * newer file passed over), or None/null on a first start (nothing loaded);
   * info receives the counters to continue from. Collective. */
  char *resume_from_dir(const char *dir, DdpModule *module, DdpOptimizer *optimizer, DdpLrScheduler *scheduler,
                        ddp_checkpoint_info *info) {
    ddp_buffer *report = NULL;
    int resumed = 0;
    char *text = NULL;
    if (ddp_swig_check(ddp_strategy_resume_from_dir($self, dir, &module, NULL, 1, optimizer ? &optimizer : NULL,
                                                    optimizer ? 1 : 0, scheduler ? &scheduler : NULL,
                                                    scheduler ? 1 : 0, &resumed, info, NULL, &report)))
      return NULL;
    if (resumed && report) {
      size_t n = ddp_buffer_size(report);
      text = (char *)malloc(n + 1);
      if (text) {
        memcpy(text, ddp_buffer_data(report), n);
        text[n] = 0;
      }
    }
    ddp_buffer_free(report);
    return text;
  }
  /** PyTorch's Join: this rank is out of batches (options' join_enabled). */
  void join() { ddp_swig_check(ddp_strategy_join($self)); }
  /** Lightning's SLURM auto-requeue: whether the requeue signal came. */
  bool requeue_requested() {
    int out = 0;
    ddp_swig_check(ddp_strategy_requeue_requested($self, &out));
    return out != 0;
  }
  /** Lightning's setup_environment: launches the other local ranks (popen) when needed and joins the group. */
  void setup_environment() { ddp_swig_check(ddp_strategy_setup_environment($self)); }
  /** This process's global rank (after setup_environment). */
  int global_rank() { return ddp_strategy_global_rank($self); }
  /** This process's rank on its node. */
  int local_rank() { return ddp_strategy_local_rank($self); }
  /** This node's index. */
  int node_rank() { return ddp_strategy_node_rank($self); }
  /** The number of processes in the job. */
  int world_size() { return ddp_strategy_world_size($self); }
  /** True on global rank 0. */
  bool is_global_zero() { return ddp_strategy_is_global_zero($self) != 0; }
  /** Lightning's setup: the module on the root device with rank 0's weights, and DDP's gradient sync attached. */
  void setup_module(DdpModule *module) { ddp_swig_check(ddp_strategy_setup_module($self, module)); }
  /** The module's forward under the strategy (precision's autocast, DDP's pre-forward); the input goes to the root device. */
  DdpTensor *forward(DdpModule *module, const DdpTensor *input) {
    DdpTensor *out = NULL;
    ddp_swig_check(ddp_strategy_forward($self, module, input, &out));
    return out;
  }
  /** Lightning's backward: the precision's scaling, then autograd, with DDP's gradient sync overlapping it. */
  void backward(const DdpTensor *loss) { ddp_swig_check(ddp_strategy_backward($self, loss)); }
  /** Lightning's block_backward_sync (no_sync): while on, gradients accumulate locally. */
  void block_backward_sync(bool on) { ddp_swig_check(ddp_strategy_block_backward_sync($self, on)); }
  /** Lightning's barrier; name is for messages only. */
  void barrier(const char *name = NULL) { ddp_swig_check(ddp_strategy_barrier($self, name)); }
  /** Lightning's reduce_boolean_decision over the strategy's group. */
  bool reduce_boolean_decision(bool decision, bool all = true) {
    int out = 0;
    ddp_swig_check(ddp_strategy_reduce_boolean_decision($self, decision, all, &out));
    return out != 0;
  }
  /** On global rank 0, atomically; collective (opt may be None/null). */
  void save_checkpoint(const char *path, const DdpModule *module, const DdpOptimizer *opt, long long step,
                       long long epoch) {
    ddp_swig_check(ddp_strategy_save_checkpoint($self, path, module, opt, step, epoch, NULL, 0));
  }
  /** Every rank; returns (step, epoch). */
  void load_checkpoint(const char *path, DdpModule *module, DdpOptimizer *opt, long long *OUT_STEP,
                       long long *OUT_EPOCH) {
    int64_t step = 0, epoch = 0;
    ddp_swig_check(ddp_strategy_load_checkpoint($self, path, module, opt, &step, &epoch, NULL));
    *OUT_STEP = (long long)step;
    *OUT_EPOCH = (long long)epoch;
  }
  /** Undoes setup (the gradient sync, the group, the host cache); a later setup_environment starts again. */
  void teardown() { ddp_swig_check(ddp_strategy_teardown($self)); }
}

%include "training_surface.i"
%include "strategy_surface.i"
