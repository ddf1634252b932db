#include "ddp/group.h"

#include "common/error.h"
#include "handles.h"

using namespace ddp::capi;

extern "C" {

ddp_status ddp_group_options_init(ddp_group_options* opts, unsigned int version) {
  return init_options(opts, version, DDP_GROUP_OPTIONS_VERSION, ddp_group_options DDP_GROUP_OPTIONS_INIT, "ddp_group_options_init");
}

ddp_status ddp_group_init(ddp_group** out, const ddp_env* env, const ddp_group_options* opts) {
  if (!out) return invalid("ddp_group_init: out is NULL");
  *out = nullptr;
  return fence([&] {
    ddp::core::GroupOptions o;
    if (opts) {
      ddp::core::check_arg(opts->version == DDP_GROUP_OPTIONS_VERSION,
                     "ddp_group_init: unknown options version " + std::to_string(opts->version));
      if (opts->backend) o.backend = opts->backend;
      ddp::core::check_arg(opts->timeout_ms >= 0, "ddp_group_init: timeout_ms " +
                                                std::to_string(opts->timeout_ms) + " is negative");
      if (opts->timeout_ms > 0) o.timeout = ddp::core::Millis(opts->timeout_ms);
      o.device = to_core(opts->device);
    }
    ddp::core::ClusterEnv e = env ? require(env, "env")->env
                            : ddp::core::detect_cluster_env(ddp::core::process_env_lookup());
    auto h = std::make_unique<ddp_group>();
    h->group = std::shared_ptr<ddp::core::Group>(ddp::core::Group::init(e, o));
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_group_new_subgroups(ddp_group* parent, int group_size, ddp_group** out) {
  if (!out) return invalid("ddp_group_new_subgroups: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* p = require(parent, "parent");
    ddp::core::check_arg(group_size >= 0, "group_size " + std::to_string(group_size) + " is negative");
    auto h = std::make_unique<ddp_group>();
    h->group = std::shared_ptr<ddp::core::Group>(p->group->new_subgroup(group_size));
    hand_out(out, std::move(h));
  });
}

int ddp_group_rank(const ddp_group* g) { auto* h = live(g); return h ? h->group->rank() : -1; }
int ddp_group_size(const ddp_group* g) { auto* h = live(g); return h ? h->group->size() : -1; }
const char* ddp_group_backend(const ddp_group* g) {
  auto* h = live(g);
  if (!h) return "";
  const std::string& name = h->group->backend_name();
  return name == "nccl" ? "nccl" : name == "shm" ? "shm" : "gloo";
}
int64_t ddp_group_timeout_ms(const ddp_group* g) {
  auto* h = live(g); return h ? static_cast<int64_t>(h->group->timeout().count()) : -1;
}
ddp_status ddp_group_set_timeout(ddp_group* g, int64_t timeout_ms) {
  return fence([&] { require(g, "group")->group->set_timeout(ddp::core::Millis(timeout_ms)); });
}
ddp_status ddp_group_set_debug_detail(ddp_group* g, int enabled) {
  return fence([&] { require(g, "group")->group->set_detail_checks(enabled != 0); });
}
int ddp_group_debug_detail(const ddp_group* g) { auto* h = live(g); return h && h->group->detail_checks() ? 1 : 0; }
int ddp_group_is_broken(const ddp_group* g) { auto* h = live(g); return h && h->group->broken() ? 1 : 0; }
void ddp_group_free(ddp_group* g) { release(g); }

}  // extern "C"
