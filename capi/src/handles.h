// The structs behind the C API's opaque handles, and the registry that lets
// every entry point reject NULL, freed and foreign pointers with
// DDP_E_INVALID_ARGUMENT instead of crashing.
#pragma once

#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "ddp/comm_hook.h"
#include "hooks/powersgd.h"
#include "comm/group.h"
#include "env/cluster_env.h"
#include "fence.h"

struct ddp_tensor {
  at::Tensor t;
  std::vector<int64_t> shape;  // borrowed by ddp_tensor_shape
};

struct ddp_buffer {
  std::vector<uint8_t> bytes;
};

struct ddp_env {
  ddp::ClusterEnv env;
};

// A group is shared: works, reducers, averagers and hooks made on it keep it
// alive, so freeing the handle first (as garbage collectors in the bindings
// do, in any order) never leaves them pointing at a destroyed group.
struct ddp_group {
  std::shared_ptr<ddp::Group> group;
};

struct ddp_work {
  std::shared_ptr<ddp::Group> group;  // declared first: outlives `pending`
  ddp::PendingPtr pending;
};

namespace ddp {
class Reducer;
class CommHook;
class ModelAverager;
}
struct ddp_model_averager {
  std::shared_ptr<ddp::Group> group;
  std::unique_ptr<ddp::ModelAverager> averager;
  ~ddp_model_averager();
};
struct ddp_comm_hook {
  std::shared_ptr<ddp::CommHook> hook;  // unset for a custom hook until bound to a reducer's group
  ddp_comm_hook_fn fn = nullptr;
  void* user_data = nullptr;
  std::shared_ptr<ddp::PowerSgdHook> stats;  // PowerSGD (also when wrapped): its compression statistics
  std::shared_ptr<ddp_comm_hook> inner;      // a wrapper's inner hook (a custom one is bound with it)
  at::ScalarType wrap_dtype = at::ScalarType::Undefined;
};
struct ddp_reducer {
  std::shared_ptr<ddp::Group> group;  // declared first: outlives `reducer`
  std::unique_ptr<ddp::Reducer> reducer;
  ddp_group* handle = nullptr;  // the caller's handle, passed to custom C hooks while it is live
  ~ddp_reducer();
};

namespace ddp::capi {

enum class Kind { Tensor, Buffer, Env, Group, Work, Reducer, CommHook, ModelAverager };

void registry_add(const void* p, Kind k);
void registry_remove(const void* p);
bool registry_has(const void* p, Kind k);

template <typename T> constexpr Kind kind_of();
template <> constexpr Kind kind_of<ddp_tensor>() { return Kind::Tensor; }
template <> constexpr Kind kind_of<ddp_buffer>() { return Kind::Buffer; }
template <> constexpr Kind kind_of<ddp_env>() { return Kind::Env; }
template <> constexpr Kind kind_of<ddp_group>() { return Kind::Group; }
template <> constexpr Kind kind_of<ddp_work>() { return Kind::Work; }
template <> constexpr Kind kind_of<ddp_reducer>() { return Kind::Reducer; }
template <> constexpr Kind kind_of<ddp_comm_hook>() { return Kind::CommHook; }
template <> constexpr Kind kind_of<ddp_model_averager>() { return Kind::ModelAverager; }

const char* kind_name(Kind k);

// True when `p` is a live handle of type T.
template <typename T>
bool live(const T* p) {
  return p && registry_has(p, kind_of<std::remove_const_t<T>>());
}

// Throws DDP_E_INVALID_ARGUMENT naming `what` unless `p` is live.
void require_live_impl(const void* p, Kind k, const char* what);
template <typename T>
T* require(T* p, const char* what) {
  require_live_impl(p, kind_of<std::remove_const_t<T>>(), what);
  return p;
}

// Hands a new handle to the caller: registers it and stores it in *out.
template <typename T>
void hand_out(T** out, std::unique_ptr<T> h) {
  registry_add(h.get(), kind_of<T>());
  *out = h.release();
}

// Frees a handle if it is live (NULL and unknown pointers are ignored).
template <typename T>
void release(T* p) {
  if (!live(p)) return;
  registry_remove(p);
  delete p;
}

std::unique_ptr<ddp_tensor> wrap_tensor(at::Tensor t);

}  // namespace ddp::capi
