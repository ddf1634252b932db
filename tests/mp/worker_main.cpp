// main() of the multi-process worker programs (mp_worker, hardening_worker):
// runs the scenario named on the command line.
#include <signal.h>

#include <cstdio>
#include <chrono>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "worker_scenarios.h"

namespace worker {
int g_failures = 0;
int g_rank = -1;

namespace {
std::map<std::string, Scenario>& scenarios() {
  static std::map<std::string, Scenario> all;
  return all;
}
}  // namespace

RegisterScenario::RegisterScenario(const char* name, Scenario fn) { scenarios()[name] = fn; }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

std::vector<std::string> shm_settings() {
  const char* v = std::getenv("DDP_TEST_SHM_SETTINGS");
  if (!v) return {"default"};
  std::vector<std::string> out;
  std::stringstream all(v);
  for (std::string one; std::getline(all, one, ';');) out.push_back(one);
  return out;
}

ScopedSetting::ScopedSetting(const std::string& setting) {
  if (setting == "default") return;
  std::stringstream words(setting);
  for (std::string word; words >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "[rank %d] DDP_TEST_SHM_SETTINGS: '%s' is not NAME=VALUE\n", g_rank, word.c_str());
      std::exit(3);
    }
    const std::string name = word.substr(0, eq);
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name.c_str(), word.c_str() + eq + 1, 1);
  }
}

ScopedSetting::~ScopedSetting() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
    else unsetenv(it->first.c_str());
  }
}

ddp_group* join(int64_t timeout_ms, const char* backend) {
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = timeout_ms;
  const char* from_env = std::getenv("WORKER_BACKEND");
  o.backend = backend ? backend : (from_env && *from_env ? from_env : nullptr);
  ddp_group* g = nullptr;
  ddp_status s = ddp_group_init(&g, nullptr, &o);
  if (s != DDP_OK) {
    std::fprintf(stderr, "[rank %d] ddp_group_init: %s: %s\n", g_rank, ddp_status_string(s), ddp_last_error_message());
    std::exit(3);
  }
  return g;
}

ddp_group* join_then_set_timeout(int64_t timeout_ms, const char* backend) {
  ddp_group* g = join(30000, backend);
  if (ddp_group_set_timeout(g, timeout_ms) != DDP_OK) {
    std::fprintf(stderr, "[rank %d] ddp_group_set_timeout: %s\n", g_rank, ddp_last_error_message());
    std::exit(3);
  }
  return g;
}

// All-reduces `t` until a call fails (at most `limit` calls), running
// `before(iteration)` ahead of each; returns the failing status and how long
// that call took, and logs both.
std::pair<ddp_status, double> all_reduce_until_failure(ddp_group* g, ddp_tensor* t, int limit,
                                                       const std::function<void(int)>& before) {
  ddp_status st = DDP_OK;
  double el = 0;
  for (int it = 0; it < limit && st == DDP_OK; ++it) {
    before(it);
    auto t0 = std::chrono::steady_clock::now();
    st = ddp_all_reduce(g, t, DDP_SUM);
    el = seconds_since(t0);
  }
  std::fprintf(stderr, "[rank %d] all_reduce -> %s after %.2f s: %s\n", g_rank, ddp_status_string(st), el,
               ddp_last_error_message());
  return {st, el};
}

}  // namespace worker

int main(int argc, char** argv) {
  using namespace worker;
  g_rank = env_int("RANK", -1);
  // Under ddprun a failure makes the launcher SIGTERM the others; tests that
  // check what the survivors saw let them finish on their own instead.
  if (std::getenv("DDP_TEST_IGNORE_SIGTERM")) signal(SIGTERM, SIG_IGN);
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s <scenario>\n", argv[0]);
    return 2;
  }
  auto it = scenarios().find(argv[1]);
  if (it == scenarios().end()) {
    std::fprintf(stderr, "unknown scenario %s\n", argv[1]);
    return 2;
  }
  it->second();
  if (g_failures) std::fprintf(stderr, "[rank %d] %d check(s) failed\n", g_rank, g_failures);
  return g_failures ? 1 : 0;
}
