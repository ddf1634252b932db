// The scenarios a multi-process worker program can run, each registered by
// name from the file of its area (collectives, failures, launch, reducer,
// hooks; hardening for hardening_worker). worker_main.cpp holds main():
// `<worker> <scenario>`, with the rendezvous environment from the launcher;
// exit code 0 means every check of the scenario held.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "worker_util.h"

namespace worker {

using Scenario = void (*)();

struct RegisterScenario {
  RegisterScenario(const char* name, Scenario fn);
};

// An integer from the environment, or `fallback`.
int env_int(const char* name, int fallback);

// Joins the job's group (timeout_ms 0: the default) over `backend` (NULL:
// $WORKER_BACKEND, else the default); exits with code 3, naming the status,
// when that fails.
ddp_group* join(int64_t timeout_ms = 0, const char* backend = nullptr);
// join() with a 30 s rendezvous (ranks that start late on a loaded host),
// then `timeout_ms` for the collectives (ddp_group_set_timeout). The store's
// calls keep the 30 s: only for scenarios whose failures come from
// collectives (the store host may stop in one), not from a call to the store
// itself (a rendezvous, a segment made through the store).
ddp_group* join_then_set_timeout(int64_t timeout_ms, const char* backend = nullptr);

// All-reduces `t` until a call fails (at most `limit` calls), running
// `before(iteration)` ahead of each; returns the failing status and how long
// that call took, and logs both.
std::pair<ddp_status, double> all_reduce_until_failure(ddp_group* g, ddp_tensor* t, int limit,
                                                       const std::function<void(int)>& before);

// The settings of the shm backend that a scenario comparing shm with Gloo
// runs one after another against a single Gloo run (Gloo's results do not
// depend on them), from DDP_TEST_SHM_SETTINGS: settings separated by ';',
// each a list of NAME=VALUE separated by spaces ("default": none). Unset:
// one setting, the environment as it is.
std::vector<std::string> shm_settings();

// Puts a setting's variables into the environment for its lifetime, and
// the values they had (or their absence) back after.
class ScopedSetting {
 public:
  explicit ScopedSetting(const std::string& setting);
  ~ScopedSetting();
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Gradient i, element k of rank r: small integers, so that g * (1/world)
// and the sums over ranks are exact and the average can be checked exactly
// (the reducer's and the hooks' scenarios).
inline float grad_value(int r, size_t i, size_t k, int step) {
  return static_cast<float>(static_cast<int>((r * 13 + i * 7 + k * 3 + step * 5) % 17) - 8);
}

}  // namespace worker

#define WORKER_SCENARIO_CAT2(a, b) a##b
#define WORKER_SCENARIO_CAT(a, b) WORKER_SCENARIO_CAT2(a, b)
#define WORKER_SCENARIO(name, fn) \
  static const worker::RegisterScenario WORKER_SCENARIO_CAT(registered_, __LINE__)(name, fn)
