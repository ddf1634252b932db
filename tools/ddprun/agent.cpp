#include "agent.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "bounded_store.h"
#include "common/descriptor_limit.h"
#include "common/error.h"
#include "elastic.h"
#include "flight.h"
#include "heartbeat.h"
#include "launch/supervisor.h"
#include "launch/worker_env.h"
#include "report.h"
#include "store/meeting.h"
#include "store/wire_client.h"
#include "store/wire_server.h"

namespace ddprun {
using namespace ddp::core::launch;
using ddp::core::fail;
using ddp::core::Status;
using ddp::core::KeyStore;
using ddp::core::PrefixKeys;

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

std::string find_in_path(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + prog;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  fail(Status::InvalidArgument, "program '" + prog + "' was not found on PATH");
}

class Agent {
 public:
  // One node: a random job id nobody else can guess. Several: every agent
  // must derive the same one, from the rendezvous id (--rdzv-id; choose one
  // that is not guessable where others can reach the store).
  explicit Agent(DdprunArgs a)
      : a_(std::move(a)),
        job_id_(a_.max_nodes == 1 ? random_job_id() : "run-" + a_.run_id),
        store_host_(a_.node_rank == 0) {}

  int run() {
    install_signal_handlers();
    // The store this agent hosts holds a connection or two per rank of
    // the job, and the usual soft limit of 1024 descriptors ended a job of
    // some hundreds of ranks (their connections waited in the backlog until
    // their timeout): the agent takes its hard limit. Its workers get the
    // soft limit they had (a program that uses select(2) needs its
    // descriptors below 1024).
    workers_descriptor_limit_ = ddp::core::raise_descriptor_limit(RLIM_INFINITY);
    try {
      return run_rounds();
    } catch (const std::exception& e) {
      // A stop signal gave up a store call (the rendezvous, the last wait
      // for the other nodes): no worker is running any more.
      if (int sig = g_stop_signal.load()) {
        std::cerr << "ddprun: stopped by " << signal_name(sig) << " (" << e.what() << ")\n";
        return 128 + sig;
      }
      throw;
    }
  }

 private:
  int run_rounds() {
    open_store();
    auto argv = worker_argv(a_);
    argv[0] = find_in_path(argv[0]);
    std::string label = "ddprun " + a_.command.front();
    std::vector<Failure> last_failures;
    auto job_keys = std::make_shared<PrefixKeys>("ddprun/" + job_id_, store_);
    // An elastic agent that starts while the job runs joins its newest round.
    int first = 0;
    if (a_.elastic() && !store_host_)
      first = calls_.call([job_keys] { return newest_round(*job_keys); }, op_bound(), "reading the job's round");
    int failures = 0;  // rounds that failed (--max-restarts); rounds that admit nodes are not failures
    for (int restart = first;; ++restart) {
      RoundStore round = round_keys(restart);
      Joined joined = rendezvous(round, job_keys, restart);
      if (joined == Joined::TooLate) continue;  // came after this round closed: the next
      if (joined == Joined::JobFinished) return 0;
      heartbeat_.begin_round(round, std::make_shared<PrefixKeys>(ddp::core::job_key_prefix(job_id_, restart), store_));
      JobResult job = run_round(argv, restart);
      if (job.stop_signal) {
        heartbeat_.publish_failure("node " + std::to_string(a_.node_rank) + " stopped by " +
                                   signal_name(job.stop_signal));
        std::cerr << "ddprun: stopped by " << signal_name(job.stop_signal) << "; workers ended\n";
        return 128 + job.stop_signal;
      }
      std::string why;
      const bool workers_done = !heartbeat_.node_lost() && job.ok() && !job.stopped_by_check;
      if (workers_done && wait_for_all_nodes(round, &why)) {
        if (a_.elastic() && store_host_) close_for_good(restart + 1);
        return 0;  // every node's workers succeeded
      }
      if (admitting_nodes(round, job)) {
        std::cerr << "ddprun: round " << restart << " (" << a_.nnodes << " node(s)) stopped to admit "
                  << "the node(s) waiting to join; restarting all workers\n";
        continue;
      }
      if (heartbeat_.node_lost()) {
        // The workers' failures follow from the lost node; it is the cause.
        if (!job.ok()) last_failures = failures_of(job, a_);
        why = heartbeat_.why();
      } else if (!job.ok() && !job.stopped_by_check) {
        last_failures = failures_of(job, a_);
        heartbeat_.publish_failure(job.summary());
        why = job.summary();
      } else if (why.empty()) {
        why = heartbeat_.why().empty() ? heartbeat_.read_failure() : heartbeat_.why();
      }
      if (failures < a_.max_restarts && !calls_.lost()) {
        ++failures;
        std::cerr << "ddprun: round " << restart << " failed (" << why << "); restarting all workers ("
                  << failures << " of " << a_.max_restarts << ")\n";
        flight_.print_verdict(std::cerr);
        continue;
      }
      const bool cannot_go_on = heartbeat_.node_lost() || (last_failures.empty() && (calls_.lost() ||
                                                                                     heartbeat_.rank_quit_unjoined()));
      if (!last_failures.empty()) print_failure_summary(last_failures, label, restart);
      flight_.print_verdict(std::cerr);
      if (cannot_go_on) std::cerr << "ddprun: the job cannot go on: " << why << "\n";
      else if (last_failures.empty()) std::cerr << "ddprun: the job failed on another node: " << why << "\n";
      write_error_file(a_.error_file, last_failures, restart, why);
      return 1;
    }
  }

  Millis rdzv_timeout() const { return Millis(static_cast<int64_t>(a_.rdzv_timeout_s * 1000)); }
  Millis monitor() const { return Millis(std::max<int64_t>(10, static_cast<int64_t>(a_.monitor_interval_s * 1000))); }
  // Single store operations (a set, an add, a read) answer in milliseconds
  // from a live host; the agent timeout is how long a silent one is trusted.
  Millis op_bound() const {
    return std::max(Millis(static_cast<int64_t>(a_.agent_timeout_s * 1000)), Millis(1000));
  }

  // Node 0 hosts the agent store (which the workers use too, as torchrun's
  // do, through c10d's client) on master_addr's address only, and talks to
  // it like the others, which connect, retrying until the rendezvous
  // deadline. Neither needs LibTorch (store/wire_server.h).
  void open_store() {
    std::string addr = a_.master_addr;
    int port = a_.master_port, node = a_.node_rank;
    Millis timeout = rdzv_timeout();
    if (node == 0) {
      int bound = port;
      int fd = ddp::core::launch::listen_socket(addr, port, &bound);
      server_ = std::make_unique<ddp::core::WireStoreServer>(fd);
      port = a_.master_port = server_->port();
    }
    std::string where = addr + ":" + std::to_string(port);
    std::shared_ptr<KeyStore> store = calls_.call([addr, port, timeout, node, where]() -> std::shared_ptr<KeyStore> {
      try {
        return std::make_shared<ddp::core::WireStoreClient>(addr, port, timeout);
      } catch (const ddp::core::Error& e) {
        if (e.status() != Status::Timeout || node == 0) throw;
        fail(Status::Timeout, "node " + std::to_string(node) + " could not reach the rendezvous store at " + where +
                                  " within " + std::to_string(timeout.count()) +
                                  " ms; is node 0 running, and are that address and port right? (" + e.what() + ")");
      }
    }, timeout + Millis(5000), "connecting to the rendezvous store");
    store_ = store;
  }

  // An elastic agent may come after its round closed (it joins the next
  // one), or after the job finished.
  enum class Joined { Yes, TooLate, JobFinished };
  Joined rendezvous(const RoundStore& round, const RoundStore& job_keys, int restart) {
    Millis timeout = rdzv_timeout();
    std::string where = a_.master_addr + ":" + std::to_string(a_.master_port);
    if (!a_.elastic()) {
      int nodes = a_.nnodes;
      calls_.call([round, nodes, timeout, where] { return ddp::core::count_in(*round, nodes, timeout, where); },
                  timeout + Millis(5000), "the rendezvous of the nodes");
      return Joined::Yes;
    }
    if (store_host_) calls_.call([job_keys, restart] { open_round(*job_keys, restart); }, op_bound(), "opening a round");
    ElasticRound r;
    r.min_nodes = a_.min_nodes;
    r.max_nodes = a_.max_nodes;
    r.last_call = Millis(static_cast<int64_t>(a_.last_call_s * 1000));
    r.timeout = timeout;
    r.closer = store_host_;
    r.where = where;
    auto place = calls_.call([round, r] { return join_elastic_round(*round, r); }, timeout + Millis(5000),
                             "the elastic rendezvous");
    if (!place) {
      std::cerr << "ddprun: round " << restart << " had closed; this node waits to join the next\n";
      return Joined::TooLate;
    }
    if (place->nodes == 0) {
      std::cerr << "ddprun: the job finished before this node was admitted\n";
      return Joined::JobFinished;
    }
    a_.node_rank = place->node_rank;
    a_.nnodes = place->nodes;
    std::cerr << "ddprun: round " << restart << ": node " << a_.node_rank << " of " << a_.nnodes << " (world size "
              << a_.nnodes * a_.nproc_per_node << ")\n";
    return Joined::Yes;
  }

  // The agents' keys of round `restart`.
  RoundStore round_keys(int restart) const {
    return std::make_shared<PrefixKeys>("ddprun/" + job_id_ + "/round" + std::to_string(restart), store_);
  }

  // The job is done: agents waiting for round `next` learn that none comes.
  void close_for_good(int next) {
    RoundStore round = round_keys(next);
    try {
      calls_.call([round] { close_round_for_good(*round, Millis(2000)); }, op_bound() + Millis(2000),
                  "closing the job's rounds");
    } catch (const std::exception&) {
      // Best effort: a waiting agent then ends at its rendezvous timeout.
    }
  }

  // An elastic round with room ended (its workers stopped or failed) while
  // some node waits to join: it is restarted to admit them, not a failure.
  bool admitting_nodes(const RoundStore& round, const JobResult& job) {
    if (!a_.elastic() || job.stop_signal || a_.nnodes >= a_.max_nodes || calls_.lost()) return false;
    try {
      return calls_.call([round] { return nodes_waiting(*round); }, op_bound(), "counting the nodes waiting") > 0;
    } catch (const std::exception&) {
      return false;
    }
  }

  JobResult run_round(const std::vector<std::string>& argv, int restart) {
    flight_.clear(a_.node_rank * a_.nproc_per_node, a_.nproc_per_node);
    std::vector<ChildSpec> children;
    for (int lr = 0; lr < a_.nproc_per_node; ++lr) {
      WorkerPlace w;
      w.local_rank = lr;
      w.local_world_size = a_.nproc_per_node;
      w.node_rank = a_.node_rank;
      w.nnodes = a_.nnodes;
      w.rank = a_.node_rank * a_.nproc_per_node + lr;
      w.world_size = a_.nnodes * a_.nproc_per_node;
      w.master_addr = a_.master_addr;
      w.master_port = a_.master_port;
      w.job_id = job_id_;
      w.restart = restart;
      w.max_restarts = a_.max_restarts;
      w.run_id = a_.run_id;
      w.agent_hosts_store = true;
      ChildSpec c;
      c.rank = w.rank;
      c.argv = argv;
      c.env = worker_env(w, {{"DDP_FLIGHT_RECORDER_FILE", flight_.prefix()}});
      c.capture_output = true;
      c.descriptor_limit = workers_descriptor_limit_;
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
    so.should_stop = [this](const std::vector<ChildStatus>& now) { return !heartbeat_.fine(now); };
    return run_job(children, so);
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
        if (!heartbeat_.fine_now()) {
          *why = heartbeat_.why();
          return false;
        }
        if (calls_.call([round] { return round->add("done", 0); }, op_bound(), "counting the nodes done") >=
            a_.nnodes) {
          // Node 0 hosts the store: it leaves last.
          if (store_host_) wait_for_goodbyes(round);
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
      *why = std::string("lost the rendezvous store: ") + e.what();
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
  FlightRecords flight_;
  bool store_host_;  // this agent holds the store (--node-rank 0); elastic rounds renumber the nodes
  BoundedStore calls_{&g_stop_signal};
  Heartbeat heartbeat_{calls_, a_};
  std::unique_ptr<ddp::core::WireStoreServer> server_;  // node 0 only; outlives every call on store_
  std::shared_ptr<KeyStore> store_;
  std::mutex out_mutex_;
  rlim_t workers_descriptor_limit_ = 0;  // 0: as the agent's
};

}  // namespace

int run_agent(DdprunArgs a) { return Agent(std::move(a)).run(); }

}  // namespace ddprun
