#include "launch/ddprun.h"

#include <signal.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "comm/failure.h"
#include "comm/group_impl.h"
#include "comm/torch_logging.h"
#include "common/error.h"
#include "launch/bounded_store.h"
#include "launch/ddprun_args.h"
#include "launch/supervisor.h"

namespace ddp::launch {
namespace {

std::atomic<int> g_stop_signal{0};

void on_stop_signal(int sig) { g_stop_signal.store(sig); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaction(s, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

// "2", "0.5": seconds as the user wrote them, not "2.000000".
std::string seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string now_iso() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

std::string find_in_path(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  fail(DDP_E_INVALID_ARGUMENT, "program '" + prog + "' was not found on PATH");
}

// torchrun's worker environment.
std::vector<std::string> worker_env(const DdprunArgs& a, int local_rank, int port, int restart,
                                    const std::string& job_id) {
  int world = a.nnodes * a.nproc_per_node;
  int rank = a.node_rank * a.nproc_per_node + local_rank;
  std::vector<std::pair<std::string, std::string>> set = {
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"RANK", std::to_string(rank)},
      {"GROUP_RANK", std::to_string(a.node_rank)},
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_NAME", "default"},
      {"LOCAL_WORLD_SIZE", std::to_string(a.nproc_per_node)},
      {"WORLD_SIZE", std::to_string(world)},
      {"GROUP_WORLD_SIZE", std::to_string(a.nnodes)},
      {"ROLE_WORLD_SIZE", std::to_string(world)},
      {"MASTER_ADDR", a.master_addr},
      {"MASTER_PORT", std::to_string(port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(a.max_restarts)},
      {"TORCHELASTIC_RUN_ID", a.run_id},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},
      {"DDP_JOB_ID", job_id},
  };
  if (!std::getenv("OMP_NUM_THREADS") && a.nproc_per_node > 1) set.push_back({"OMP_NUM_THREADS", "1"});
  return child_environment(set, {"TORCHELASTIC_ERROR_FILE", "DDP_MASTER_LISTEN_FD"});
}

struct Failure {
  int rank, local_rank, node;
  ChildStatus status;
  std::string time;
};

void write_error_file(const std::string& path, const std::vector<Failure>& failures, int restarts,
                      const std::string& message) {
  if (path.empty()) return;
  std::ostringstream o;
  o << "{\"message\": \"" << json_escape(message) << "\", \"restart_count\": " << restarts << ", \"failures\": [";
  for (size_t i = 0; i < failures.size(); ++i) {
    const auto& f = failures[i];
    o << (i ? ", " : "") << "{\"rank\": " << f.rank << ", \"local_rank\": " << f.local_rank
      << ", \"node_rank\": " << f.node << ", \"host\": \"" << json_escape(hostname()) << "\", \"pid\": "
      << f.status.pid << ", \"exitcode\": " << (f.status.signal ? -f.status.signal : f.status.exit_code)
      << ", \"signal\": " << (f.status.signal ? "\"" + signal_name(f.status.signal) + "\"" : "null")
      << ", \"time\": \"" << f.time << "\", \"root_cause\": " << (i == 0 ? "true" : "false") << "}";
  }
  o << "]}\n";
  std::string tmp = path + ".tmp";
  std::ofstream f(tmp);
  f << o.str();
  f.close();
  if (!f || std::rename(tmp.c_str(), path.c_str()) != 0)
    std::cerr << "ddprun: cannot write the error file " << path << "\n";
}

void print_failure_summary(const std::vector<Failure>& failures, const std::string& prog, int restarts) {
  std::ostringstream o;
  o << "============================================================\n"
    << prog << " FAILED (restarts used: " << restarts << ")\n"
    << "------------------------------------------------------------\n";
  for (size_t i = 0; i < failures.size(); ++i) {
    const auto& f = failures[i];
    o << (i == 0 ? "Root Cause (first observed failure):\n" : (i == 1 ? "Other failures:\n" : ""))
      << "[" << i << "]:\n"
      << "  time      : " << f.time << "\n"
      << "  host      : " << hostname() << "\n"
      << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ", node: " << f.node << ")\n"
      << "  exitcode  : " << (f.status.signal ? -f.status.signal : f.status.exit_code) << " (pid: " << f.status.pid
      << ")\n"
      << "  error     : " << (f.status.signal ? "signal " + std::to_string(f.status.signal) + " (" +
                                                    signal_name(f.status.signal) + ")"
                                              : "exit code " + std::to_string(f.status.exit_code))
      << "\n";
  }
  o << "============================================================\n";
  std::cerr << o.str() << std::flush;
}

// Failures of one round, root cause first; stopped-by-us workers are not failures.
std::vector<Failure> failures_of(const JobResult& job, const DdprunArgs& a) {
  std::vector<Failure> out;
  auto add = [&](size_t i) {
    const auto& c = job.children[i];
    out.push_back({c.rank, c.rank - a.node_rank * a.nproc_per_node, a.node_rank, c, now_iso()});
  };
  if (job.first_failure >= 0) add(static_cast<size_t>(job.first_failure));
  for (size_t i = 0; i < job.children.size(); ++i)
    if (static_cast<int>(i) != job.first_failure && job.children[i].ended && !job.children[i].ok() &&
        !job.children[i].stopped_by_us)
      add(i);
  return out;
}

using RoundStore = c10::intrusive_ptr<c10d::Store>;

// One look at the job from the store: the other nodes' heartbeat counters,
// whether a failure was published, and which of this node's workers that
// ended with 0 never joined while other ranks did.
struct NodesSeen {
  std::vector<int64_t> beats;
  bool failed = false;
  std::vector<int> quit_unjoined;  // global ranks
  int64_t joining = 0;             // ranks that announced joining
};

// Beats this node's counter (with several nodes) and reads the rest.
NodesSeen look_at_nodes(c10d::Store& round, c10d::Store& job, int me, int nodes,
                        const std::vector<int>& quitters) {
  NodesSeen s;
  if (nodes > 1) {
    round.add("hb/" + std::to_string(me), 1);
    for (int n = 0; n < nodes; ++n) s.beats.push_back(n == me ? 0 : round.add("hb/" + std::to_string(n), 0));
    s.failed = round.check({"failed"});
  }
  for (int r : quitters)
    if (!has_joined(job, r)) s.quit_unjoined.push_back(r);
  if (!s.quit_unjoined.empty()) s.joining = ranks_joining(job);
  return s;
}

class Agent {
 public:
  // One node: a random job id nobody else can guess. Several: every agent
  // must derive the same one, from the rendezvous id (--rdzv-id; choose one
  // that is not guessable where others can reach the store).
  explicit Agent(DdprunArgs a)
      : a_(std::move(a)), job_id_(a_.nnodes == 1 ? random_job_id() : "run-" + a_.run_id) {}

  int run() {
    install_signal_handlers();
    try {
      return run_rounds();
    } catch (const std::exception& e) {
      // A stop signal gave up a store call (the rendezvous, the last wait
      // for the other nodes): no worker is running any more.
      if (int sig = g_stop_signal.load()) {
        std::cerr << "ddprun: stopped by " << signal_name(sig) << " (" << short_what(e) << ")\n";
        return 128 + sig;
      }
      throw;
    }
  }

 private:
  int run_rounds() {
    connect_store();
    auto argv = worker_argv(a_);
    argv[0] = find_in_path(argv[0]);
    std::string label = "ddprun " + a_.command.front();
    for (int restart = 0;; ++restart) {
      RoundStore round = c10::make_intrusive<c10d::PrefixStore>(
          "ddprun/" + job_id_ + "/round" + std::to_string(restart), store_);
      rendezvous(round);
      beats_.clear();
      stop_reason_.clear();
      ended_unjoined_ = false;
      JobResult job = run_round(round, argv, restart);
      if (job.stop_signal) {
        publish_failure(round, "node " + std::to_string(a_.node_rank) + " stopped by " + signal_name(job.stop_signal));
        std::cerr << "ddprun: stopped by " << signal_name(job.stop_signal) << "; workers ended\n";
        return 128 + job.stop_signal;
      }
      std::string why;
      if (!job.ok() && !job.stopped_by_check) {
        auto failures = failures_of(job, a_);
        last_failures_ = failures;
        publish_failure(round, job.summary());
        why = job.summary();
      } else if (job.stopped_by_check || !wait_for_all_nodes(round, &why)) {
        if (why.empty()) why = stop_reason_.empty() ? read_failure(round) : stop_reason_;
      } else {
        return 0;  // every node's workers succeeded
      }
      if (restart < a_.max_restarts && !calls_.lost()) {
        std::cerr << "ddprun: round " << restart << " failed (" << why << "); restarting all workers ("
                  << restart + 1 << " of " << a_.max_restarts << ")\n";
        continue;
      }
      if (!last_failures_.empty()) print_failure_summary(last_failures_, label, restart);
      else if (calls_.lost() || ended_unjoined_) std::cerr << "ddprun: the job cannot go on: " << why << "\n";
      else std::cerr << "ddprun: the job failed on another node: " << why << "\n";
      write_error_file(a_.error_file, last_failures_, restart, why);
      return 1;
    }
  }

  Millis rdzv_timeout() const { return Millis(static_cast<int64_t>(a_.rdzv_timeout_s * 1000)); }
  Millis agent_timeout() const { return Millis(static_cast<int64_t>(a_.agent_timeout_s * 1000)); }
  Millis monitor() const { return Millis(std::max<int64_t>(10, static_cast<int64_t>(a_.monitor_interval_s * 1000))); }
  // Single store operations (a set, an add, a read) answer in milliseconds
  // from a live host; the agent timeout is how long a silent one is trusted.
  Millis op_bound() const { return std::max(agent_timeout(), Millis(1000)); }

  // Node 0 hosts the agent store (which the workers use too, as torchrun's
  // do); the others connect, retrying until the rendezvous deadline.
  void connect_store() {
    c10d::TCPStoreOptions so;
    so.isServer = a_.node_rank == 0;
    so.numWorkers = std::nullopt;
    so.waitWorkers = false;
    so.timeout = rdzv_timeout();
    if (so.isServer) {
      int port = 0;
      listen_fd_ = listen_socket(a_.master_addr, a_.master_port, &port);
      so.masterListenFd = listen_fd_;
      a_.master_port = port;
    }
    so.port = static_cast<uint16_t>(a_.master_port);
    std::string host = a_.master_addr;  // node 0 listens on that address only
    try {
      store_ = calls_.call([host, so]() -> c10::intrusive_ptr<c10d::Store> {
        return c10::make_intrusive<c10d::TCPStore>(host, so);
      }, rdzv_timeout() + Millis(5000), "connecting to the rendezvous store");
    } catch (const std::exception& e) {
      if (g_stop_signal.load()) throw;
      fail(DDP_E_TIMEOUT, "node " + std::to_string(a_.node_rank) + " could not reach the rendezvous at " +
                              a_.master_addr + ":" + std::to_string(a_.master_port) + " within " +
                              seconds(a_.rdzv_timeout_s) + " s: " + short_what(e));
    }
    port_ = a_.master_port;
  }

  void rendezvous(const RoundStore& round) {
    int nodes = a_.nnodes;
    Millis timeout = rdzv_timeout();
    std::string where = a_.master_addr + ":" + std::to_string(port_);
    calls_.call([round, nodes, timeout, where] { return count_in(*round, nodes, timeout, where); },
                timeout + Millis(5000), "the rendezvous of the nodes");
  }

  JobResult run_round(const RoundStore& round, const std::vector<std::string>& argv, int restart) {
    std::vector<ChildSpec> children;
    for (int lr = 0; lr < a_.nproc_per_node; ++lr) {
      ChildSpec c;
      c.rank = a_.node_rank * a_.nproc_per_node + lr;
      c.argv = argv;
      c.env = worker_env(a_, lr, port_, restart, job_id_);
      c.capture_output = true;
      children.push_back(std::move(c));
    }
    SupervisorOptions so;
    so.grace = Millis(static_cast<int64_t>(a_.grace_period_s * 1000));
    so.stop_request = &g_stop_signal;
    so.check_interval = monitor();
    int first_rank = a_.node_rank * a_.nproc_per_node;
    so.on_line = [this, first_rank](int rank, const std::string& line) {
      if (!a_.local_ranks_filter.empty()) {
        bool shown = false;
        for (int lr : a_.local_ranks_filter) shown |= lr == rank - first_rank;
        if (!shown) return;
      }
      std::lock_guard<std::mutex> lock(out_mutex_);
      std::string out = "[rank" + std::to_string(rank) + "]: " + line + "\n";
      fwrite(out.data(), 1, out.size(), stdout);
      fflush(stdout);
    };
    RoundStore job = c10::make_intrusive<c10d::PrefixStore>(job_key_prefix(job_id_, restart), store_);
    so.should_stop = [this, round, job](const std::vector<ChildStatus>& now) { return !job_fine(round, job, now); };
    look_ = {};
    joined_.clear();
    return run_job(children, so);
  }

  // The supervisor's check while workers run; it never blocks the
  // supervisor (which must go on reaping workers and acting on signals): a
  // look at the store runs in the background, and one that has not answered
  // within the agent timeout means the store is unreachable.
  bool job_fine(const RoundStore& round, const RoundStore& job, const std::vector<ChildStatus>& children) {
    auto now = std::chrono::steady_clock::now();
    if (look_.valid() && look_.wait_for(Millis(0)) == std::future_status::ready) {
      NodesSeen seen;
      try {
        seen = look_.get();
      } catch (const std::exception& e) {
        stop_reason_ = "lost the rendezvous store: " + short_what(e);
        return false;
      }
      if (!judge(round, seen, now)) return false;
    }
    if (look_.valid()) {
      if (now - look_started_ < agent_timeout()) return true;
      calls_.abandon("the heartbeat of node " + std::to_string(a_.node_rank) + " got no answer within " +
                     seconds(a_.agent_timeout_s) + " s");
      stop_reason_ = "lost the rendezvous store at " + a_.master_addr + ":" + std::to_string(port_) +
                     ": no answer for " + seconds(a_.agent_timeout_s) + " s (--agent-timeout)";
      return false;
    }
    std::vector<int> quitters;  // ended with 0, not yet seen to have joined
    for (const auto& c : children)
      if (c.ok() && !joined_.count(c.rank)) quitters.push_back(c.rank);
    if (a_.nnodes == 1 && quitters.empty()) return true;  // nothing to ask the store
    int me = a_.node_rank, nodes = a_.nnodes;
    look_ = calls_.start([round, job, me, nodes, quitters] { return look_at_nodes(*round, *job, me, nodes, quitters); },
                         "the heartbeat");
    look_started_ = now;
    asked_ = quitters;
    return true;
  }

  // Agents beat a counter each check; a node whose counter stands still for
  // --agent-timeout has lost its agent (and, with PDEATHSIG, its workers):
  // the others must not wait for it forever.
  bool judge(const RoundStore& round, const NodesSeen& seen, std::chrono::steady_clock::time_point now) {
    if (seen.failed) {
      stop_reason_ = read_failure(round);
      return false;
    }
    for (int r : asked_)
      if (std::find(seen.quit_unjoined.begin(), seen.quit_unjoined.end(), r) == seen.quit_unjoined.end())
        joined_.insert(r);
    asked_.clear();
    if (!seen.quit_unjoined.empty() && seen.joining > 0) {
      stop_reason_ = "rank " + std::to_string(seen.quit_unjoined.front()) +
                     " exited with code 0 before joining the process group; the ranks that joined would wait "
                     "for it until their timeout";
      ended_unjoined_ = true;
      publish_failure(round, stop_reason_);
      return false;
    }
    if (beats_.empty()) beats_.assign(a_.nnodes, {-1, now});
    for (int n = 0; n < a_.nnodes && !seen.beats.empty(); ++n) {
      if (n == a_.node_rank) continue;
      if (seen.beats[n] != beats_[n].first) beats_[n] = {seen.beats[n], now};
      else if (now - beats_[n].second > agent_timeout()) {
        stop_reason_ = "the agent of node " + std::to_string(n) + " stopped responding for " +
                       seconds(a_.agent_timeout_s) + " s";
        publish_failure(round, stop_reason_);
        return false;
      }
    }
    return true;
  }

  void publish_failure(const RoundStore& round, const std::string& why) {
    try {
      calls_.call([round, why] { round->set("failed", std::vector<uint8_t>(why.begin(), why.end())); },
                  std::min(op_bound(), Millis(5000)), "publishing the failure");
    } catch (...) {
      // The store is gone or unreachable: nobody is left to tell.
    }
  }

  std::string read_failure(const RoundStore& round) {
    try {
      auto v = calls_.call([round] { return round->get("failed"); }, op_bound(), "reading the failure");
      return std::string(v.begin(), v.end());
    } catch (const std::exception& e) {
      return "lost the rendezvous store: " + short_what(e);
    }
  }

  // This node's workers succeeded: wait until every node's did, or one failed.
  bool wait_for_all_nodes(const RoundStore& round, std::string* why) {
    if (a_.nnodes == 1) return true;
    try {
      calls_.call([round] { return round->add("done", 1); }, op_bound(), "reporting this node done");
      for (;;) {
        if (g_stop_signal.load()) {
          *why = "stopped by " + signal_name(g_stop_signal.load());
          return false;
        }
        auto seen_at = std::chrono::steady_clock::now();
        int me = a_.node_rank, nodes = a_.nnodes;
        NodesSeen seen = calls_.call([round, me, nodes] { return look_at_nodes(*round, *round, me, nodes, {}); },
                                     op_bound(), "the heartbeat");
        if (!judge(round, seen, seen_at)) {
          *why = stop_reason_;
          return false;
        }
        if (calls_.call([round] { return round->add("done", 0); }, op_bound(), "counting the nodes done") >= nodes) {
          // Node 0 hosts the store: it leaves last.
          if (me == 0) wait_for_goodbyes(round);
          else calls_.call([round] { return round->add("left", 1); }, op_bound(), "saying goodbye");
          return true;
        }
        std::this_thread::sleep_for(monitor());
      }
    } catch (const std::exception& e) {
      if (g_stop_signal.load()) {
        *why = "stopped by " + signal_name(g_stop_signal.load());
        return false;
      }
      *why = "lost the rendezvous store: " + short_what(e);
      return false;
    }
  }

  void wait_for_goodbyes(const RoundStore& round) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline && !g_stop_signal.load() &&
           calls_.call([round] { return round->add("left", 0); }, op_bound(), "waiting for goodbyes") < a_.nnodes - 1)
      std::this_thread::sleep_for(Millis(20));
  }

  DdprunArgs a_;
  std::string job_id_;
  BoundedStore calls_{&g_stop_signal};
  c10::intrusive_ptr<c10d::Store> store_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex out_mutex_;
  std::vector<Failure> last_failures_;
  std::vector<std::pair<int64_t, std::chrono::steady_clock::time_point>> beats_;
  std::future<NodesSeen> look_;  // the heartbeat in flight, if any
  std::vector<int> asked_;       // the quitters that look asks about
  std::set<int> joined_;         // this round's ranks seen to have joined
  bool ended_unjoined_ = false;  // a rank ended with 0 without joining: a failure of this node
  std::chrono::steady_clock::time_point look_started_;
  std::string stop_reason_;  // why the heartbeat stopped the round
};

}  // namespace

int ddprun_main(int argc, char** argv) {
  quiet_torch_logging();
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& s : args)
    if (s == "-h" || s == "--help") {
      std::cout << ddprun_usage();
      return 0;
    }
  DdprunArgs a;
  try {
    a = parse_ddprun_args(args);
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 2;
  }
  try {
    return Agent(std::move(a)).run();
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << short_what(e) << "\n";
    return 1;
  }
}

}  // namespace ddp::launch
