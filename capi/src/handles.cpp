#include "handles.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "common/error.h"

namespace ddp::capi {
namespace {
struct Entry {
  Kind kind;
  void* object;
};
struct Registry {
  std::shared_mutex mutex;
  std::unordered_map<std::uintptr_t, Entry> live;
  std::uintptr_t issued = 0;  // tokens handed out so far
};
Registry& registry() {
  static auto* r = new Registry();  // never destroyed: handles may be freed at exit
  return *r;
}
// Tokens are multiples of 16, so they look (and align) like the pointers the
// bindings take them for; 2^60 of them outlast any process.
constexpr int kTokenShift = 4;

// What each thread found last: a 4-byte collective looks up two handles
// (group and tensor), and the map's lookup under the read lock was about
// 120 instructions each, a quarter of the call. An entry holds only while
// no handle has been taken out since it was filled: every take counts in
// g_takes (under the registry's write lock, before its object can be
// freed), and an entry filled at another count is ignored. Tokens are never
// reused, so an add cannot make an entry wrong.
std::atomic<uint64_t> g_takes{0};
struct Found {
  std::uintptr_t token = 0;
  Kind kind{};
  void* object = nullptr;
  uint64_t takes = 0;
};
constexpr unsigned kFoundSlots = 4;
thread_local Found t_found[kFoundSlots];
thread_local unsigned t_next_found = 0;
}  // namespace

void* registry_add(void* object, Kind k) {
  auto& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  std::uintptr_t token = ++r.issued << kTokenShift;
  r.live.emplace(token, Entry{k, object});
  return reinterpret_cast<void*>(token);
}

void* registry_find(const void* token, Kind k) {
  if (!token) return nullptr;
  const auto key = reinterpret_cast<std::uintptr_t>(token);
  const uint64_t takes = g_takes.load(std::memory_order_acquire);
  for (const Found& f : t_found)
    if (f.token == key && f.takes == takes && f.kind == k) return f.object;
  auto& r = registry();
  std::shared_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.live.find(key);
  if (it == r.live.end() || it->second.kind != k) return nullptr;
  // Filled with the count read before the lookup: a take in between makes
  // the entry stale at once (conservative, never wrong).
  t_found[t_next_found++ % kFoundSlots] = {key, k, it->second.object, takes};
  return it->second.object;
}

void* registry_take(const void* token, Kind k) {
  if (!token) return nullptr;
  auto& r = registry();
  std::unique_lock<std::shared_mutex> lock(r.mutex);
  auto it = r.live.find(reinterpret_cast<std::uintptr_t>(token));
  if (it == r.live.end() || it->second.kind != k) return nullptr;
  void* object = it->second.object;
  r.live.erase(it);
  g_takes.fetch_add(1, std::memory_order_release);
  return object;
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
    case Kind::Module: return "ddp_module";
    case Kind::Optimizer: return "ddp_optimizer";
    case Kind::Strategy: return "ddp_strategy";
    case Kind::LrScheduler: return "ddp_lr_scheduler";
    case Kind::Outputs: return "ddp_outputs";
    case Kind::Metric: return "ddp_metric";
    case Kind::ByteSink: return "ddp_byte_sink (one is live only during the load callback it was given to)";
  }
  return "handle";
}

void* require_live_impl(const void* p, Kind k, const char* what) {
  if (!p) fail(DDP_E_INVALID_ARGUMENT, std::string(what) + " is NULL");
  void* object = registry_find(p, k);
  if (!object)
    fail(DDP_E_INVALID_ARGUMENT, std::string(what) + " is not a live " + kind_name(k) +
                                     " (already freed, or not made by libddp)");
  return object;
}

std::unique_ptr<ddp_tensor> wrap_tensor(at::Tensor t) {
  auto h = std::make_unique<ddp_tensor>();
  h->shape.assign(t.sizes().begin(), t.sizes().end());
  h->t = std::move(t);
  return h;
}

std::unique_ptr<ddp_outputs> wrap_outputs(ddp::core::ModuleOutputs o) {
  auto h = std::make_unique<ddp_outputs>();
  h->outputs = std::move(o);
  return h;
}

std::vector<at::Tensor> tensors_of(const ddp_tensor* const* handles, size_t n) {
  if (n > 0 && !handles) fail(DDP_E_INVALID_ARGUMENT, "inputs is NULL with " + std::to_string(n) + " of them");
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(require(handles[i], ("input " + std::to_string(i)).c_str())->t);
  return out;
}

std::vector<ddp::core::NamedTensor> keywords_of(const char* const* names, const ddp_tensor* const* values, size_t n) {
  if (n > 0 && (!names || !values))
    fail(DDP_E_INVALID_ARGUMENT, "kw_names or kw_values is NULL with " + std::to_string(n) + " keywords");
  std::vector<ddp::core::NamedTensor> out;
  for (size_t i = 0; i < n; ++i) {
    if (!names[i]) fail(DDP_E_INVALID_ARGUMENT, "keyword " + std::to_string(i) + "'s name is NULL");
    out.push_back({names[i], require(values[i], ("keyword '" + std::string(names[i]) + "'").c_str())->t});
  }
  return out;
}

}  // namespace ddp::capi
