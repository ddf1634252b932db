// ddprun's watch over a round while its workers run. Agents beat counters in
// the store and read each other's: a node whose counter stands still for
// --agent-timeout has lost its agent (and, with PDEATHSIG, its workers). A
// failure published by any node ends every node. A rank that ended with 0
// before joining, while other ranks joined, ends the job (they would wait
// for it until their timeout). The looks run in the background, so the
// supervisor that asks never blocks on the store. A node found dead is also
// written to the job's abort key, which every worker's group watches: a rank
// blocked in a collective with that node returns DDP_E_PEER_FAILED naming it
// within the heartbeat window, before its workers are stopped.
#pragma once

#include <chrono>
#include <future>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "args.h"
#include "bounded_store.h"
#include "launch/supervisor.h"
#include "store/key_store.h"

namespace ddprun {

using RoundStore = std::shared_ptr<ddp::core::KeyStore>;

// One look at the job in the store.
struct NodesSeen {
  std::vector<int64_t> beats;      // each node's counter (several nodes only)
  bool failed = false;             // a failure was published
  std::vector<int> quit_unjoined;  // asked-about ranks that never joined
  int64_t joining = 0;             // ranks that announced joining
  int64_t waiting = 0;             // elastic: nodes waiting to join after this round
};

class Heartbeat {
 public:
  Heartbeat(BoundedStore& calls, const DdprunArgs& a) : calls_(calls), a_(a) {}

  // A new round: the agents' keys (`round`) and the workers' (`job`).
  void begin_round(RoundStore round, RoundStore job);

  // The supervisor's check; never blocks. False when the round must stop;
  // why() then says why.
  bool fine(const std::vector<ddp::core::launch::ChildStatus>& children);
  // One look that waits for its answer (within the agent timeout), for the
  // wait after this node's workers succeeded.
  bool fine_now();

  const std::string& why() const { return why_; }
  // The round stopped because one of this node's ranks ended before joining.
  bool rank_quit_unjoined() const { return quit_unjoined_; }
  // The round stopped because another node was found dead (why() names it).
  bool node_lost() const { return workers_told_until_.has_value(); }

  // The round's failure flag, which ends every node's round.
  void publish_failure(const std::string& why);
  std::string read_failure();

 private:
  using Clock = std::chrono::steady_clock;
  bool judge(const NodesSeen& seen, Clock::time_point now);
  ddp::core::launch::Millis agent_timeout() const;

  BoundedStore& calls_;
  const DdprunArgs& a_;
  RoundStore round_, job_;
  std::future<NodesSeen> look_;  // in flight, if valid
  Clock::time_point look_started_;
  std::vector<int> asked_;  // the ranks that look asks about
  std::set<int> joined_;    // ranks seen to have joined
  std::vector<std::pair<int64_t, Clock::time_point>> beats_;  // last counter of each node, and when it moved
  std::string why_;
  bool quit_unjoined_ = false;
  // A node found dead: this node's workers were told through the job's
  // abort key and get until then to return their status by themselves.
  std::optional<Clock::time_point> workers_told_until_;
  void tell_workers(const std::string& why, Clock::time_point now);
};

}  // namespace ddprun
