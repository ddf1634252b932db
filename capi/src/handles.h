// The structs behind the C API's opaque handles, and the registry that lets
// every entry point reject NULL, freed and foreign pointers with
// DDP_E_INVALID_ARGUMENT instead of crashing.
#pragma once

#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "ddp/ddp.h"
#include "hooks/powersgd.h"
#include "comm/group.h"
#include "env/cluster_env.h"
#include "fence.h"
#include "model/script_module.h"

struct ddp_tensor {
  at::Tensor t;
  std::vector<int64_t> shape;  // borrowed by ddp_tensor_shape
};

struct ddp_buffer {
  std::vector<uint8_t> bytes;
};

struct ddp_env {
  ddp::core::ClusterEnv env;
};

// A group is shared: works, reducers, averagers and hooks made on it keep it
// alive, so freeing the handle first (as garbage collectors in the bindings
// do, in any order) never leaves them pointing at a destroyed group.
struct ddp_group {
  std::shared_ptr<ddp::core::Group> group;
};

struct ddp_work {
  std::shared_ptr<ddp::core::Group> group;  // declared first: outlives `pending`
  ddp::core::PendingPtr pending;
};

namespace ddp::core {
class DdpStrategy;
class Optimizer;
class LrScheduler;
class ScriptModule;
class Reducer;
class CommHook;
class ModelAverager;
class LoggedMetric;
}
struct ddp_model_averager {
  std::shared_ptr<ddp::core::Group> group;
  std::unique_ptr<ddp::core::ModelAverager> averager;
  ~ddp_model_averager();
};
// A plain handle around a core hook; reducers given it share that hook.
struct ddp_comm_hook {
  std::shared_ptr<ddp::core::CommHook> hook;
  std::shared_ptr<ddp::core::PowerSgdHook> stats;  // PowerSGD (also when wrapped): its compression statistics
  int64_t post_localsgd_start = -1;  // post-local SGD (also when wrapped): its start_localSGD_iter; -1: not one
};
struct ddp_reducer {
  std::shared_ptr<ddp::core::Group> group;  // declared first: outlives `reducer`
  std::unique_ptr<ddp::core::Reducer> reducer;
  ~ddp_reducer();
};

// A module is shared: its parameters stay in use by the optimizer and the
// strategy made from it, whatever order the handles are freed in.
struct ddp_module {
  std::shared_ptr<ddp::core::ScriptModule> module;
  std::vector<std::string> names;  // borrowed by ddp_module_state_name
  std::vector<bool> is_parameter;
  ~ddp_module();
};
// Shared with the schedulers made over it.
struct ddp_optimizer {
  std::shared_ptr<ddp::core::Optimizer> optimizer;
  ~ddp_optimizer();
};
struct ddp_lr_scheduler {
  std::shared_ptr<ddp::core::LrScheduler> scheduler;
  ~ddp_lr_scheduler();
};
struct ddp_outputs {
  ddp::core::ModuleOutputs outputs;
};
struct ddp_metric {
  std::unique_ptr<ddp::core::LoggedMetric> metric;
  ~ddp_metric();
};
struct ddp_strategy {
  std::unique_ptr<ddp::core::DdpStrategy> strategy;
  ddp_group* group = nullptr;  // the borrowed handle ddp_strategy_group hands out, made at setup
  ~ddp_strategy();
};

namespace ddp::capi {

enum class Kind {
  Tensor, Buffer, Env, Group, Work, Reducer, CommHook, ModelAverager, Module, Optimizer, Strategy, LrScheduler,
  Outputs, Metric, ByteSink
};

// A handle is a token, not an address: each one handed out is a number this
// process never hands out again, so a freed handle stays detectably freed
// even after the allocator reuses its object's memory for a new handle.
void* registry_add(void* object, Kind k);         // registers `object`; returns its token
void* registry_find(const void* token, Kind k);   // the object, or NULL if not live
void* registry_take(const void* token, Kind k);   // unregisters; the object, or NULL

template <typename T> constexpr Kind kind_of();
template <> constexpr Kind kind_of<ddp_tensor>() { return Kind::Tensor; }
template <> constexpr Kind kind_of<ddp_buffer>() { return Kind::Buffer; }
template <> constexpr Kind kind_of<ddp_env>() { return Kind::Env; }
template <> constexpr Kind kind_of<ddp_group>() { return Kind::Group; }
template <> constexpr Kind kind_of<ddp_work>() { return Kind::Work; }
template <> constexpr Kind kind_of<ddp_reducer>() { return Kind::Reducer; }
template <> constexpr Kind kind_of<ddp_comm_hook>() { return Kind::CommHook; }
template <> constexpr Kind kind_of<ddp_model_averager>() { return Kind::ModelAverager; }
template <> constexpr Kind kind_of<ddp_module>() { return Kind::Module; }
template <> constexpr Kind kind_of<ddp_optimizer>() { return Kind::Optimizer; }
template <> constexpr Kind kind_of<ddp_strategy>() { return Kind::Strategy; }
template <> constexpr Kind kind_of<ddp_lr_scheduler>() { return Kind::LrScheduler; }
template <> constexpr Kind kind_of<ddp_outputs>() { return Kind::Outputs; }
template <> constexpr Kind kind_of<ddp_metric>() { return Kind::Metric; }
template <> constexpr Kind kind_of<ddp_byte_sink>() { return Kind::ByteSink; }

const char* kind_name(Kind k);

// The object behind `p` if it is a live handle of type T, else NULL.
template <typename T>
T* live(T* p) {
  return static_cast<T*>(registry_find(p, kind_of<std::remove_const_t<T>>()));
}

// The object behind `p`; throws DDP_E_INVALID_ARGUMENT naming `what` unless
// `p` is a live handle of type T.
void* require_live_impl(const void* p, Kind k, const char* what);
template <typename T>
T* require(T* p, const char* what) {
  return static_cast<T*>(require_live_impl(p, kind_of<std::remove_const_t<T>>(), what));
}

// Hands a new handle to the caller: registers the object and stores its
// token in *out.
template <typename T>
void hand_out(T** out, std::unique_ptr<T> h) {
  *out = static_cast<T*>(registry_add(h.get(), kind_of<T>()));
  h.release();
}

// Frees the object behind a handle if it is live (NULL, freed and unknown
// handles are ignored). The object is destroyed outside the registry's lock:
// its destructor may free handles of its own.
template <typename T>
void release(T* p) {
  using Object = std::remove_const_t<T>;
  delete static_cast<Object*>(registry_take(p, kind_of<Object>()));
}

// release(p), unless `in_use(object)` says that a call of the object is
// running (the free comes from a callback that call runs, which would go on
// in freed memory): then the object stays, for a free after that call, and
// `why` becomes this thread's last error message.
template <typename T, typename InUse>
void release_unless_in_use(T* p, InUse in_use, const char* why) {
  if (const T* h = live(p); h && in_use(*h)) {
    set_last_error(why);
    return;
  }
  release(p);
}

std::unique_ptr<ddp_tensor> wrap_tensor(at::Tensor t);
std::unique_ptr<ddp_outputs> wrap_outputs(ddp::core::ModuleOutputs o);
// The tensors behind `n` handles (each live; NULL `handles` only with n 0).
std::vector<at::Tensor> tensors_of(const ddp_tensor* const* handles, size_t n);
// Keyword inputs: `n` names and tensors (NULL arrays only with n 0).
std::vector<ddp::core::NamedTensor> keywords_of(const char* const* names, const ddp_tensor* const* values, size_t n);

}  // namespace ddp::capi
