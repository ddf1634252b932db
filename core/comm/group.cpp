#include "comm/group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstdlib>
#include <atomic>
#include <optional>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <vector>

#include "comm/backend_factory.h"
#include "comm/failure.h"
#include "comm/group_impl.h"
#include "common/error.h"

namespace ddp {
namespace {

// How often a waiting rank asks the store whether another rank failed, and
// how long one such question may take (it must not stall a wait loop).
constexpr Millis kPollInterval{100};
constexpr Millis kMonitorTimeout{2000};

// A write to a socket whose peer died raises SIGPIPE, whose default action
// kills the process; Python ignores it, and so must a C program using us.
void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

// Backends of broken groups still have a thread blocked inside a collective
// that will never complete; destroying them would join that thread and hang.
// They are kept here instead (reachable, so leak checkers stay quiet).
std::mutex g_abandoned_mutex;
std::vector<c10::intrusive_ptr<c10d::Backend>>& abandoned_backends() {
  static auto* v = new std::vector<c10::intrusive_ptr<c10d::Backend>>();
  return *v;
}

c10::intrusive_ptr<c10d::Backend> make_backend(const std::string& name, const BackendSpec& spec) {
  if (name == "gloo") return make_gloo_backend(spec);
  if (name == "nccl") return make_nccl_backend(spec);
  fail(DDP_E_INVALID_ARGUMENT, "unknown backend '" + name + "' (expected \"gloo\" or \"nccl\")");
}

// A launcher (ddp_spawn, ddprun) that bound MASTER_PORT hands rank 0 the
// listening socket, so the port cannot be taken between choosing and using
// it. Used once: a second group in the same process binds on its own.
std::optional<int> take_inherited_listen_fd(int port) {
  const char* v = std::getenv("DDP_MASTER_LISTEN_FD");
  if (!v) return std::nullopt;
  int fd = std::atoi(v);
  unsetenv("DDP_MASTER_LISTEN_FD");
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return std::nullopt;
  int bound = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  if (bound != port) return std::nullopt;  // not ours to use
  return fd;
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const ClusterEnv& env, Millis timeout,
                                                 const std::string& where) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env.master_port);
  so.isServer = env.rank == 0;
  so.numWorkers = env.world_size;
  so.waitWorkers = false;
  so.timeout = timeout;
  // Under torchrun/ddprun the agent already hosts the store on MASTER_PORT
  // and says so; every rank, rank 0 included, is then a client (as in torch).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store && std::string(agent_store) == "True") so.isServer = false;
  if (so.isServer) so.masterListenFd = take_inherited_listen_fd(env.master_port);
  try {
    return c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
  } catch (const std::exception& e) {
    std::string what = short_what(e);
    if (env.rank == 0 && (what.find("in use") != std::string::npos ||
                          what.find("EADDRINUSE") != std::string::npos))
      fail(DDP_E_IO, "rank 0 cannot host the rendezvous store on " + where +
                         ": the port is already in use; choose another MASTER_PORT (" + what + ")");
    ddp_status s = classify_exception(e);
    if (env.rank != 0 && (s == DDP_E_TIMEOUT || s == DDP_E_PEER_FAILED))
      fail(DDP_E_TIMEOUT, "rank " + std::to_string(env.rank) +
                              " could not reach the rendezvous store at " + where + " within " +
                              std::to_string(timeout.count()) +
                              " ms; is rank 0 running and are MASTER_ADDR/MASTER_PORT right? (" +
                              what + ")");
    fail(s == DDP_E_BACKEND ? DDP_E_IO : s, "rendezvous store at " + where + ": " + what);
  }
}

std::unique_ptr<Group::Impl> finish_impl(std::unique_ptr<Group::Impl> impl, const std::string& where) {
  count_in(*impl->store, impl->size, impl->timeout, where);
  BackendSpec spec;
  spec.store = c10::make_intrusive<c10d::PrefixStore>(impl->backend_name, impl->store);
  spec.rank = impl->rank;
  spec.size = impl->size;
  spec.timeout = impl->timeout;
  spec.master_addr = impl->master_addr;
  spec.device = impl->device;
  try {
    impl->backend = make_backend(impl->backend_name, spec);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(classify_exception(e), impl->backend_name + " backend could not connect rank " +
                                    std::to_string(impl->rank) + " of " +
                                    std::to_string(impl->size) + ": " + short_what(e));
  }
  return impl;
}

}  // namespace

Group::Group(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Group::~Group() {
  if (impl_ && impl_->broken && impl_->backend) {
    std::lock_guard<std::mutex> lock(g_abandoned_mutex);
    abandoned_backends().push_back(std::move(impl_->backend));
  }
}

std::unique_ptr<Group> Group::init(const ClusterEnv& env, const GroupOptions& opts) {
  validate_cluster_env(env, env.name);
  check_arg(opts.timeout.count() > 0, "timeout must be positive");
  check_arg(opts.device.type == DDP_DEVICE_CPU || opts.device.type == DDP_DEVICE_CUDA,
            "unknown device type " + std::to_string(opts.device.type));
  ignore_sigpipe_if_default();

  auto impl = std::make_unique<Impl>();
  impl->backend_name = !opts.backend.empty() ? opts.backend
                       : opts.device.type == DDP_DEVICE_CUDA ? "nccl" : "gloo";
  check_arg(impl->backend_name == "gloo" || impl->backend_name == "nccl",
            "unknown backend '" + impl->backend_name + "' (expected \"gloo\" or \"nccl\")");
  impl->rank = env.rank;
  impl->size = env.world_size;
  impl->local_world_size = env.local_world_size;
  impl->timeout = opts.timeout;
  impl->device = opts.device;
  impl->master_addr = env.master_addr;
  // Keys are namespaced per restart and per init in this process, so that
  // a store that outlives one group (an agent's, across restarts, or a
  // second ddp_group_init) never mixes two groups' counters.
  static std::atomic<int> inits{0};
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  impl->prefix = "ddp/world/r" + std::string(restart ? restart : "0") + "/g" +
                 std::to_string(inits.fetch_add(1));

  std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  auto tcp = connect_store(env, opts.timeout, where);
  impl->store = c10::make_intrusive<c10d::PrefixStore>(impl->prefix, tcp);

  ClusterEnv monitor_env = env;
  monitor_env.rank = 1;  // a client connection, also on rank 0
  monitor_env.master_port = tcp->getPort();
  auto monitor = connect_store(monitor_env, kMonitorTimeout, where);
  impl->monitor = c10::make_intrusive<c10d::PrefixStore>(impl->prefix, monitor);

  return std::unique_ptr<Group>(new Group(finish_impl(std::move(impl), where)));
}

std::unique_ptr<Group> Group::new_subgroup(int group_size) {
  backend_for("new_subgroups");
  int gs = group_size == 0 ? impl_->local_world_size : group_size;
  check_arg(gs >= 1 && gs <= impl_->size && impl_->size % gs == 0,
            "subgroup size " + std::to_string(gs) + " does not divide the group size " +
                std::to_string(impl_->size));
  int index = impl_->rank / gs;
  std::string sub = "sub" + std::to_string(impl_->subgroups_made++) + "/" + std::to_string(index);

  auto impl = std::make_unique<Impl>();
  impl->backend_name = impl_->backend_name;
  impl->rank = impl_->rank % gs;
  impl->size = gs;
  impl->local_world_size = std::min(gs, impl_->local_world_size);
  impl->timeout = impl_->timeout;
  impl->device = impl_->device;
  impl->master_addr = impl_->master_addr;
  impl->prefix = impl_->prefix + "/" + sub;
  impl->store = c10::make_intrusive<c10d::PrefixStore>(sub, impl_->store);
  impl->monitor = c10::make_intrusive<c10d::PrefixStore>(sub, impl_->monitor);
  return std::unique_ptr<Group>(new Group(finish_impl(std::move(impl), impl_->prefix + "/" + sub)));
}

int Group::rank() const { return impl_->rank; }
int Group::size() const { return impl_->size; }
const std::string& Group::backend_name() const { return impl_->backend_name; }
Millis Group::timeout() const { return impl_->timeout; }
ddp_device Group::device() const { return impl_->device; }

void Group::set_timeout(Millis timeout) {
  check_arg(timeout.count() > 0, "timeout must be positive");
  impl_->timeout = timeout;
  if (impl_->backend) impl_->backend->setTimeout(timeout);
}

bool Group::broken() const { return impl_->broken; }

c10d::Backend& Group::backend_for(const char* op) {
  if (impl_->broken) {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    fail(DDP_E_STATE, std::string(op) + ": the group is unusable after an earlier failure (" +
                          impl_->broken_reason + "); free it and create a new one");
  }
  return *impl_->backend;
}

void Group::fail_and_publish(ddp_status status, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    if (!impl_->broken) {
      impl_->broken_reason = message;
      impl_->broken = true;
    }
  }
  // Tell the other ranks, so that those waiting on a peer that is not the
  // dead one stop too. Best effort: the store host may be the dead peer.
  std::string payload = std::to_string(status) + "|rank " + std::to_string(impl_->rank) + ": " + message;
  try {
    impl_->monitor->set("abort", std::vector<uint8_t>(payload.begin(), payload.end()));
  } catch (...) {
  }
  throw Error(status, message);
}

void Group::throw_if_peer_reported() {
  auto now = Clock::now();
  if (now < impl_->next_poll) return;
  impl_->next_poll = now + kPollInterval;
  std::string payload;
  try {
    if (!impl_->monitor->check({"abort"})) return;
    auto v = impl_->monitor->get("abort");
    payload.assign(v.begin(), v.end());
  } catch (const std::exception& e) {
    ddp_status s = classify_exception(e);
    if (s == DDP_E_TIMEOUT) return;  // store host stalled: keep waiting up to our deadline
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    impl_->broken_reason = "lost the rendezvous store on rank 0 (" + short_what(e) + ")";
    impl_->broken = true;
    throw Error(DDP_E_PEER_FAILED, "lost the connection to the rendezvous store hosted by rank 0 "
                                   "(rank 0 has probably died): " + short_what(e));
  }
  auto bar = payload.find('|');
  ddp_status status = DDP_E_PEER_FAILED;
  if (bar != std::string::npos) {
    try {
      status = std::stoi(payload.substr(0, bar));
    } catch (...) {
    }
    payload = payload.substr(bar + 1);
  }
  std::lock_guard<std::mutex> lock(impl_->state_mutex);
  impl_->broken_reason = "reported by " + payload;
  impl_->broken = true;
  throw Error(status, "another rank failed, so this one stops too: " + payload);
}

}  // namespace ddp
