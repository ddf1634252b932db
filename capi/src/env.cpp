#include "ddp/env.h"

#include <cstring>
#include <map>

#include "common/error.h"
#include "handles.h"

using namespace ddp::capi;

namespace {
ddp::core::EnvLookup lookup_from_vars(const char* const* vars) {
  auto table = std::make_shared<std::map<std::string, std::string>>();
  for (size_t i = 0; vars && vars[i]; ++i) {
    const char* eq = std::strchr(vars[i], '=');
    ddp::core::check_arg(eq != nullptr, std::string("vars[") + std::to_string(i) + "] = '" + vars[i] +
                                      "' is not of the form NAME=value");
    (*table)[std::string(vars[i], eq)] = eq + 1;
  }
  return [table](const std::string& name) -> std::optional<std::string> {
    auto it = table->find(name);
    if (it == table->end()) return std::nullopt;
    return it->second;
  };
}

void hand_out_env(ddp_env** out, ddp::core::ClusterEnv e) {
  auto h = std::make_unique<ddp_env>();
  h->env = std::move(e);
  hand_out(out, std::move(h));
}
}  // namespace

extern "C" {

ddp_status ddp_env_detect(ddp_env** out) {
  if (!out) return invalid("ddp_env_detect: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out_env(out, ddp::core::detect_cluster_env(ddp::core::process_env_lookup())); });
}

ddp_status ddp_env_from_vars(ddp_env** out, const char* const* vars, const char* name) {
  if (!out) return invalid("ddp_env_from_vars: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto lookup = lookup_from_vars(vars);
    hand_out_env(out, name ? ddp::core::read_cluster_env(name, lookup) : ddp::core::detect_cluster_env(lookup));
  });
}

ddp_status ddp_env_from_name(ddp_env** out, const char* name) {
  if (!out) return invalid("ddp_env_from_name: out is NULL");
  *out = nullptr;
  if (!name) return invalid("ddp_env_from_name: name is NULL");
  return fence([&] { hand_out_env(out, ddp::core::read_cluster_env(name, ddp::core::process_env_lookup())); });
}

ddp_status ddp_env_new(ddp_env** out, int rank, int world_size, int local_rank, int local_world_size,
                       int node_rank, const char* master_addr, int master_port) {
  if (!out) return invalid("ddp_env_new: out is NULL");
  *out = nullptr;
  return fence([&] {
    ddp::core::ClusterEnv e;
    e.name = "explicit";
    e.rank = rank;
    e.world_size = world_size;
    e.local_rank = local_rank;
    e.local_world_size = local_world_size;
    e.node_rank = node_rank;
    e.master_addr = master_addr ? master_addr : "127.0.0.1";
    e.master_port = master_port;
    ddp::core::validate_cluster_env(e, "explicit");
    hand_out_env(out, std::move(e));
  });
}

const char* ddp_env_name(const ddp_env* e) { auto* h = live(e); return h ? h->env.name.c_str() : ""; }
int ddp_env_rank(const ddp_env* e) { auto* h = live(e); return h ? h->env.rank : -1; }
int ddp_env_world_size(const ddp_env* e) { auto* h = live(e); return h ? h->env.world_size : -1; }
int ddp_env_local_rank(const ddp_env* e) { auto* h = live(e); return h ? h->env.local_rank : -1; }
int ddp_env_local_world_size(const ddp_env* e) { auto* h = live(e); return h ? h->env.local_world_size : -1; }
int ddp_env_node_rank(const ddp_env* e) { auto* h = live(e); return h ? h->env.node_rank : -1; }
const char* ddp_env_master_addr(const ddp_env* e) { auto* h = live(e); return h ? h->env.master_addr.c_str() : ""; }
int ddp_env_master_port(const ddp_env* e) { auto* h = live(e); return h ? h->env.master_port : -1; }
void ddp_env_free(ddp_env* e) { release(e); }

}  // extern "C"
