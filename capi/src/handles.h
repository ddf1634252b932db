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

std::unique_ptr<ddp_tensor> wrap_tensor(at::Tensor t);

}  // namespace ddp::capi
