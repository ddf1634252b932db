#include "comm/group.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdlib>
#include <atomic>
#include <optional>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <condition_variable>
#include <map>
#include <thread>
#include <vector>

#include "comm/backend_factory.h"
#include "comm/failure.h"
#include "comm/group_impl.h"
#include "comm/rendezvous.h"
#include "comm/store_monitor.h"
#include "comm/watched_store.h"
#include "comm/torch_logging.h"
#include "common/error.h"
#include "common/descriptor_limit.h"
#include "common/standard_streams.h"
#include "debug/flight_recorder.h"
#include "launch/supervisor.h"

namespace ddp::core {
namespace {

// A write to a socket whose peer died raises SIGPIPE, whose default action
// kills the process; Python ignores it, and so must a C program using us.
void ignore_sigpipe_if_default() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
}

// How long a failing rank waits for its failure to reach the store, and for
// a look at what the others published (the root cause) before its own.
constexpr Millis kPublishWait{1000};
constexpr Millis kRootCauseWait{1000};
// How soon after joining a store its closing means it was being replaced
// (see Group::init); the new one is then waited for within the same timeout.
constexpr Millis kStoreReplacedWait{2000};

// The first word of a flight recorder dump's reason.
const char* failure_kind(Status s) {
  return s == Status::Timeout ? "timeout" : s == Status::PeerFailed ? "peer failure" : "failure";
}

c10::intrusive_ptr<c10d::Backend> make_backend(const std::string& name, const BackendSpec& spec) {
  if (name == "gloo") return make_gloo_backend(spec);
  if (name == "nccl") return make_nccl_backend(spec);
  if (name == "shm") return make_shm_backend(spec);
  fail(Status::InvalidArgument, "unknown backend '" + name + "' (expected \"gloo\", \"shm\" or \"nccl\")");
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

bool agent_hosts_store() {
  // Under torchrun/ddprun the agent already hosts the store on MASTER_PORT
  // and says so; every rank, rank 0 included, is then a client (as in torch).
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return agent_store && std::string(agent_store) == "True";
}

// Rank 0's store server (see host_store), on the socket a launcher bound or
// one bound to MASTER_ADDR's address.
c10::intrusive_ptr<c10d::TCPStore> host_rank0_store(const ClusterEnv& env, Millis timeout) {
  std::optional<int> fd = take_inherited_listen_fd(env.master_port);
  return host_store(env.master_addr, env.master_port, fd ? *fd : -1, env.world_size, timeout);
}

// The job's keys live under a prefix that only its ranks know when a
// launcher handed them DDP_JOB_ID (a random id): a stray process that can
// reach the store cannot guess the keys that abort or join this job.
std::string job_prefix() {
  const char* job = std::getenv("DDP_JOB_ID");
  const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return job_key_prefix(job && *job ? job : "world", restart ? std::atoi(restart) : 0);
}

// DDP_DEBUG: "DETAIL" turns the cross-rank call checks on; "OFF" and
// "INFO" (torch's other levels) leave them off.
bool detail_checks_from_env() {
  const char* v = std::getenv("DDP_DEBUG");
  if (!v || !*v) return false;
  std::string s(v);
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "DETAIL") return true;
  check_arg(s == "OFF" || s == "INFO", "DDP_DEBUG='" + std::string(v) + "' is not OFF, INFO or DETAIL");
  return false;
}

// The group's store monitor, on a connection of its own: a subgroup's too,
// so that each monitor may shut its connection down when it ends, ending a
// call its watcher has in progress against a stopped store host (a thread
// left in one could wake in the middle of the process's exit).
void connect_monitor(Group::Impl& impl, const std::string& who) {
  auto monitor = connect_store(impl.master_addr, impl.master_port, impl.timeout, who, "rank 0");
  impl.monitor_store = c10::make_intrusive<c10d::PrefixStore>(impl.prefix, monitor);
  impl.job_monitor_store = c10::make_intrusive<c10d::PrefixStore>(impl.job_prefix, monitor);
  impl.monitor = std::make_unique<StoreMonitor>(impl.monitor_store, impl.job_monitor_store);
}

// Every rank's backend up, or every rank told why not: a rank whose backend
// cannot start publishes its reason, and the others stop waiting for it
// (in the backend's own store waits, or in the ready check after them, which
// a backend that connects lazily, NCCL, needs: its first collective would
// otherwise wait inside NCCL for a rank that is gone).
void connect_backend(Group::Impl& impl) {
  BackendSpec spec;
  auto report = impl.monitor ? impl.monitor->reporter() : WatchedPrefixStore::Report{};
  spec.store = c10::make_intrusive<WatchedPrefixStore>(impl.backend_name, impl.store, report);
  spec.rank = impl.rank;
  spec.size = impl.size;
  spec.timeout = impl.timeout;
  spec.master_addr = impl.master_addr;
  spec.device = impl.device;
  spec.node = impl.node;
  spec.peer_report = report;
  if (impl.monitor)
    spec.publish_failure = [publish = impl.monitor->publisher(), rank = impl.rank](Status status,
                                                                                 const std::string& message) {
      publish(failure_report(status, "rank " + std::to_string(rank) + ": " + message), kPublishWait);
    };
  const std::string who = "rank " + std::to_string(impl.rank) + " of " + std::to_string(impl.size);
  try {
    impl.backend = make_backend(impl.backend_name, spec);
  } catch (const std::exception& e) {
    throw backend_connect_failure(spec, e, impl.backend_name + " backend");
  }
  impl.backend_name = impl.backend->getBackendName();  // shm falls back to gloo where it cannot share
  impl.direct = dynamic_cast<DirectCollectives*>(impl.backend.get());
  if (impl.size > 1) {
    auto ready = c10::make_intrusive<WatchedPrefixStore>("backend_ready", impl.store, report);
    std::vector<std::string> all;
    for (int r = 0; r < impl.size; ++r) all.push_back(std::to_string(r));
    try {
      ready->set(all[impl.rank], std::vector<uint8_t>{1});
      ready->wait(all, impl.timeout);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      fail(classify_exception(e), "waiting for the other ranks' " + impl.backend_name + " backends (" + who +
                                      "): " + short_what(e));
    }
  }
}

// Backends of broken groups may have a thread blocked inside a collective
// that only the backend's own timeout ends; destroying one before that would
// join the thread and block. The reaper destroys each once its timeout (and
// a margin) has passed, on a thread of its own, so a broken group's threads,
// sockets and memory come back without the caller ever waiting.
class BackendReaper {
 public:
  static BackendReaper& get() {
    static auto* r = new BackendReaper();  // never destroyed: its thread may outlive main
    return *r;
  }
  void destroy_after(c10::intrusive_ptr<c10d::Backend> backend, Millis delay) {
    std::lock_guard<std::mutex> lock(m_);
    due_.emplace(Clock::now() + delay, std::move(backend));
    if (!started_) {
      started_ = true;
      std::thread([this] { run(); }).detach();
    }
    cv_.notify_all();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(m_);
    for (;;) {
      if (due_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = due_.begin();
      if (Clock::now() < first->first) {
        cv_.wait_until(lock, first->first);
        continue;
      }
      c10::intrusive_ptr<c10d::Backend> b = std::move(first->second);
      due_.erase(first);
      lock.unlock();
      b.reset();
      lock.lock();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, c10::intrusive_ptr<c10d::Backend>> due_;
  bool started_ = false;
};

constexpr Millis kReapMargin{2000};

}  // namespace

Error backend_connect_failure(const BackendSpec& spec, const std::exception& e, const std::string& what) {
  if (spec.peer_report)
    if (auto r = spec.peer_report()) return reported_failure(*r);
  // Gloo says "Cannot resolve 127.0.0.1 to a (local) address" when it
  // could not make a socket; a lack of descriptors is named instead.
  const std::string shortage = fd_shortage_now();
  const std::string message = dynamic_cast<const Error*>(&e)
                                  ? std::string(e.what())
                                  : what + " could not connect rank " + std::to_string(spec.rank) + " of " +
                                        std::to_string(spec.size) + ": " + short_what(e) +
                                        (shortage.empty() ? "" : " (" + shortage + ")");
  // A ddp::core::Error keeps its own status.
  const Status status = shortage.empty() || dynamic_cast<const Error*>(&e) ? classify_exception(e) : Status::IO;
  if (spec.publish_failure) spec.publish_failure(status, message);
  return Error(status, message);
}

void check_timeout(Millis timeout, const std::string& what) {
  check_arg(timeout.count() > 0, what + " " + std::to_string(timeout.count()) + " ms must be positive");
  check_arg(timeout <= kMaxTimeout, what + " " + std::to_string(timeout.count()) + " ms exceeds the maximum of " +
                                        std::to_string(kMaxTimeout.count()) + " ms (about 24.8 days)");
}

Group::Group(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Group::~Group() {
  if (impl_ && impl_->broken && impl_->backend)
    BackendReaper::get().destroy_after(std::move(impl_->backend), impl_->timeout + kReapMargin);
}

std::unique_ptr<Group> Group::init(const ClusterEnv& env, const GroupOptions& opts) {
  quiet_torch_logging();
  validate_cluster_env(env, env.name);
  check_timeout(opts.timeout, "timeout");
  check_arg(opts.device.type == DeviceType::CPU || opts.device.type == DeviceType::CUDA,
            "unknown device type " + std::to_string(static_cast<int>(opts.device.type)));
  ignore_sigpipe_if_default();
  keep_standard_streams_open();

  auto impl = std::make_unique<Impl>();
  impl->backend_name = !opts.backend.empty() ? opts.backend
                       : opts.device.type == DeviceType::CUDA ? "nccl" : "shm";
  check_arg(impl->backend_name == "gloo" || impl->backend_name == "shm" || impl->backend_name == "nccl",
            "unknown backend '" + impl->backend_name + "' (expected \"gloo\", \"shm\" or \"nccl\")");
  impl->rank = env.rank;
  impl->size = env.world_size;
  impl->local_world_size = env.local_world_size;
  impl->timeout = opts.timeout;
  impl->device = opts.device;
  impl->master_addr = env.master_addr;
  impl->node = std::to_string(env.node_rank);
  impl->detail_checks = detail_checks_from_env();
  flight::configure(env.rank, env.world_size);
  static std::atomic<uint64_t> inits{0};
  impl->job_token = ++inits;

  std::string where = env.master_addr + ":" + std::to_string(env.master_port);
  int port = env.master_port;
  if (env.rank == 0 && !agent_hosts_store()) {
    auto server = host_rank0_store(env, opts.timeout);
    port = server->getPort();
    impl->server = server;
  }
  std::string who = "rank " + std::to_string(env.rank);
  // Keys are namespaced per job, per restart, and per generation of inits on
  // this store (a store that outlives one group, an agent's or across
  // restarts, never mixes two groups' counters).
  std::string base = job_prefix();
  c10::intrusive_ptr<BoundedStore> client;
  int64_t gen = 0;
  const auto deadline = Clock::now() + opts.timeout;
  // A failure this soon after joining is a store being replaced, not a timeout.
  const Millis replaced_within = std::min(kStoreReplacedWait, opts.timeout / 2);
  for (;;) {
    const auto joined_at = Clock::now();
    const Millis left = std::max(Millis(1), std::chrono::duration_cast<Millis>(deadline - joined_at));
    try {
      client = connect_store(env.master_addr, port, left, who, "rank 0");
      auto job = keys_of(c10::make_intrusive<c10d::PrefixStore>(base, client));
      announce_joining(*job, impl->rank);
      gen = join_generation(job, impl->size, left, where, opts.give_up);
      break;
    } catch (const Error& e) {
      // A store that closes moments after this rank joined it was the last
      // group's, on its way out: a teardown and a setup on the same port,
      // where this rank came back before rank 0 had closed the old store
      // (found by the lifecycle soak). The new one is coming: join it,
      // within the same overall timeout.
      const bool store_replaced = impl->server == nullptr &&
                                  (e.status() == Status::PeerFailed || e.status() == Status::Timeout) &&
                                  Clock::now() - joined_at < replaced_within && Clock::now() < deadline;
      if (!store_replaced) throw;
      std::this_thread::sleep_for(Millis(50));
    }
  }
  // Joined within what was left of the timeout; the group's store calls
  // from here on have all of it.
  client->setTimeout(opts.timeout);
  impl->prefix = base + "/g" + std::to_string(gen);
  impl->flight_label = flight::intern_label("g" + std::to_string(gen));
  impl->store = c10::make_intrusive<c10d::PrefixStore>(impl->prefix, client);

  impl->master_port = port;
  impl->job_prefix = base;
  connect_monitor(*impl, who);
  connect_backend(*impl);
  return std::unique_ptr<Group>(new Group(std::move(impl)));
}

std::unique_ptr<Group> Group::new_subgroup(int group_size) {
  backend_for("new_subgroups");
  keep_standard_streams_open();  // the subgroup's connections are new descriptors
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
  impl->node = impl_->node;
  impl->detail_checks = impl_->detail_checks;
  impl->job_token = impl_->job_token;
  impl->prefix = impl_->prefix + "/" + sub;
  impl->flight_label = flight::intern_label(impl_->flight_label + ("/" + sub));
  impl->master_port = impl_->master_port;
  impl->job_prefix = impl_->job_prefix;
  // A connection of its own, as its monitor's: set_timeout on either group
  // bounds its own store calls and not the other's.
  const std::string who = "rank " + std::to_string(impl_->rank);
  impl->store = c10::make_intrusive<c10d::PrefixStore>(
      impl->prefix, connect_store(impl->master_addr, impl->master_port, impl->timeout, who, "rank 0"));
  count_in(*keys_of(impl->store), impl->size, impl->timeout, impl->prefix);
  connect_monitor(*impl, who);
  connect_backend(*impl);
  return std::unique_ptr<Group>(new Group(std::move(impl)));
}

int Group::rank() const { return impl_->rank; }
bool Group::same_job(const Group& other) const { return impl_->job_token == other.impl_->job_token; }
int Group::size() const { return impl_->size; }
const std::string& Group::backend_name() const { return impl_->backend_name; }
Millis Group::timeout() const { return impl_->timeout; }
Device Group::device() const { return impl_->device; }

void Group::set_timeout(Millis timeout) {
  check_timeout(timeout, "set_timeout: timeout");
  impl_->timeout = timeout;
  if (impl_->backend) impl_->backend->setTimeout(timeout);
  // The group's store connections are its own (a subgroup's too): every
  // store call from here on, the backend's and the watcher's, is bounded
  // by the new timeout.
  impl_->store->setTimeout(timeout);
  if (impl_->monitor_store) impl_->monitor_store->setTimeout(timeout);
}

bool Group::broken() const { return impl_->broken; }
bool Group::detail_checks() const { return impl_->detail_checks; }
void Group::set_detail_checks(bool on) { impl_->detail_checks = on; }
int64_t Group::next_check() { return impl_->checks_made++; }
const char* Group::flight_label() const { return impl_->flight_label; }
int64_t Group::next_flight_seq() { return ++impl_->flight_seq; }

c10d::Backend& Group::backend_for(const char* op) {
  check_usable(op);
  return *impl_->backend;
}

DirectCollectives* Group::direct_for(const char* op) {
  check_usable(op);
  return impl_->direct;
}

void Group::check_usable(const char* op) {
  if (impl_->broken) {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    fail(Status::State, std::string(op) + ": the group is unusable after an earlier failure (" +
                          impl_->broken_reason + "); free it and create a new one");
  }
}

void Group::fail_and_publish(Status status, const std::string& message) {
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    if (!impl_->broken) {
      impl_->broken_reason = message;
      impl_->broken = true;
      first = true;
    }
  }
  // Tell the other ranks, so that those waiting on a peer that is not the
  // dead one stop too: those of this host through the shared segment at
  // once, all through the store. Best effort, and bounded: the store host
  // may be the dead or stopped peer.
  if (impl_->direct) impl_->direct->abort_local(status, message);
  impl_->monitor->publish(failure_report(status, "rank " + std::to_string(impl_->rank) + ": " + message), kPublishWait);
  settle_backend();
  if (first) flight::dump((std::string(failure_kind(status)) + " on rank " + std::to_string(impl_->rank) + " of group " +
                           std::string(impl_->flight_label) + ": " + message).c_str());
  throw Error(status, message);
}

// A broken group's collectives still running on a thread of the backend's
// end at their next wait (a peer aborted the segment, or this rank did);
// the failing call returns after them, so that the caller's memory they
// were using is the caller's again (comm/direct_collectives.h). The
// group's timeout bounds it, should one not end.
void Group::settle_backend() {
  if (impl_->direct) impl_->direct->settle(Clock::now() + timeout());
}

void Group::throw_reported(const std::string& reported) {
  const std::string payload = parse_report(reported).second;
  bool first;
  {
    std::lock_guard<std::mutex> lock(impl_->state_mutex);
    impl_->broken_reason = "reported by " + payload;
    first = !impl_->broken.exchange(true);
  }
  if (first) flight::dump(("another rank failed (group " + std::string(impl_->flight_label) + "): " + payload).c_str());
  settle_backend();
  throw reported_failure(reported);
}

void Group::record_call_mismatch(const std::string& what) {
  flight::dump(("mismatch on rank " + std::to_string(impl_->rank) + " of " + std::to_string(impl_->size) +
                " of group " + impl_->flight_label + ": " + what).c_str());
}

StagingPool& Group::staging_pool() { return impl_->staging; }

bool Group::peer_reported() const { return impl_->monitor->reported() || impl_->monitor->lost(); }

void Group::throw_if_peer_reported() {
  if (auto r = impl_->monitor->reported()) throw_reported(*r);
  if (auto lost = impl_->monitor->lost()) {
    bool first;
    {
      std::lock_guard<std::mutex> lock(impl_->state_mutex);
      impl_->broken_reason = "lost the rendezvous store on rank 0 (" + *lost + ")";
      first = !impl_->broken.exchange(true);
    }
    if (first)
      flight::dump(("lost the rendezvous store (group " + std::string(impl_->flight_label) + "): " + *lost).c_str());
    settle_backend();
    if (impl_->monitor->lost_by_timeout())
      throw Error(Status::Timeout, "the rendezvous store hosted by rank 0 did not answer within the group's timeout "
                                   "(rank 0 is probably stopped or stalled): " + *lost);
    throw Error(Status::PeerFailed, "lost the connection to the rendezvous store hosted by rank 0 "
                                   "(rank 0 has probably died): " + *lost);
  }
}

void Group::throw_root_cause_if_reported() {
  if (auto r = impl_->monitor->refresh(kRootCauseWait)) throw_reported(*r);
}

}  // namespace ddp::core