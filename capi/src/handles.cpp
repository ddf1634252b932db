#include "handles.h"

#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "common/error.h"

namespace ddp::capi {
namespace {
struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<const void*, Kind> live;
};
Registry& registry() {
  static auto* r = new Registry();  // never destroyed: handles may be freed at exit
  return *r;
}
}  // namespace

void registry_add(const void* p, Kind k) {
  auto& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  r.live[p] = k;
}

void registry_remove(const void* p) {
  auto& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  r.live.erase(p);
}

bool registry_has(const void* p, Kind k) {
  auto& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.live.find(p);
  return it != r.live.end() && it->second == k;
}

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::Tensor: return "ddp_tensor";
    case Kind::Buffer: return "ddp_buffer";
    case Kind::Env: return "ddp_env";
    case Kind::Group: return "ddp_group";
    case Kind::Work: return "ddp_work";
    case Kind::Reducer: return "ddp_reducer";
    case Kind::CommHook: return "ddp_comm_hook";
    case Kind::ModelAverager: return "ddp_model_averager";
  }
  return "handle";
}

void require_live_impl(const void* p, Kind k, const char* what) {
  if (!p) fail(DDP_E_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if (!registry_has(p, k))
    fail(DDP_E_INVALID_ARGUMENT, std::string(what) + " is not a live " + kind_name(k) +
                                     " (already freed, or not made by libddp)");
}

std::unique_ptr<ddp_tensor> wrap_tensor(at::Tensor t) {
  auto h = std::make_unique<ddp_tensor>();
  h->shape.assign(t.sizes().begin(), t.sizes().end());
  h->t = std::move(t);
  return h;
}

}  // namespace ddp::capi
