#include "heartbeat.h"

#include <algorithm>
#include <sstream>

#include "elastic.h"
#include "store/meeting.h"

namespace ddprun {
using ddp::core::launch::ChildStatus;
using ddp::core::launch::Millis;

namespace {

// Beats this node's counter (with several nodes) and reads the rest.
NodesSeen look_at(ddp::core::KeyStore& round, ddp::core::KeyStore& job, int me, int nodes, bool elastic,
                  const std::vector<int>& quitters) {
  NodesSeen s;
  if (elastic) s.waiting = nodes_waiting(round);
  if (nodes > 1) {
    round.add("hb/" + std::to_string(me), 1);
    for (int n = 0; n < nodes; ++n) s.beats.push_back(n == me ? 0 : round.add("hb/" + std::to_string(n), 0));
    s.failed = round.check({"failed"});
  }
  for (int r : quitters)
    if (!ddp::core::has_joined(job, r)) s.quit_unjoined.push_back(r);
  if (!s.quit_unjoined.empty()) s.joining = ddp::core::ranks_joining(job);
  return s;
}

// "2", "0.5": seconds as the user wrote them, not "2.000000".
std::string seconds(double s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

}  // namespace


Millis Heartbeat::agent_timeout() const { return Millis(static_cast<int64_t>(a_.agent_timeout_s * 1000)); }

void Heartbeat::begin_round(RoundStore round, RoundStore job) {
  round_ = std::move(round);
  job_ = std::move(job);
  look_ = {};
  asked_.clear();
  joined_.clear();
  beats_.clear();
  why_.clear();
  quit_unjoined_ = false;
  workers_told_until_.reset();
}

bool Heartbeat::fine(const std::vector<ChildStatus>& children) {
  auto now = Clock::now();
  if (workers_told_until_) {
    bool running = false;
    for (const auto& c : children) running = running || !c.ended;
    return running && now < *workers_told_until_;
  }
  if (look_.valid() && look_.wait_for(Millis(0)) == std::future_status::ready) {
    NodesSeen seen;
    try {
      seen = look_.get();
    } catch (const std::exception& e) {
      why_ = std::string("lost the rendezvous store: ") + e.what();
      return false;
    }
    if (!judge(seen, now)) return false;
  }
  if (look_.valid()) {
    if (now - look_started_ < agent_timeout()) return true;
    calls_.abandon("the heartbeat of node " + std::to_string(a_.node_rank) + " got no answer within " +
                   seconds(a_.agent_timeout_s) + " s");
    why_ = "lost the rendezvous store at " + a_.master_addr + ":" + std::to_string(a_.master_port) +
           ": no answer for " + seconds(a_.agent_timeout_s) + " s (--agent-timeout)";
    return false;
  }
  std::vector<int> quitters;  // ended with 0, not yet seen to have joined
  for (const auto& c : children)
    if (c.ok() && !joined_.count(c.rank)) quitters.push_back(c.rank);
  // Nothing to ask the store (an elastic round with room asks who waits).
  const bool asks_waiting = a_.elastic() && a_.nnodes < a_.max_nodes;
  if (a_.nnodes == 1 && quitters.empty() && !asks_waiting) return true;
  int me = a_.node_rank, nodes = a_.nnodes;
  RoundStore round = round_, job = job_;
  look_ = calls_.start([round, job, me, nodes, asks_waiting, quitters] {
    return look_at(*round, *job, me, nodes, asks_waiting, quitters);
  },
                       "the heartbeat");
  look_started_ = now;
  asked_ = quitters;
  return true;
}

bool Heartbeat::fine_now() {
  auto now = Clock::now();
  int me = a_.node_rank, nodes = a_.nnodes;
  RoundStore round = round_, job = job_;
  NodesSeen seen = calls_.call([round, job, me, nodes] { return look_at(*round, *job, me, nodes, false, {}); },
                               std::max(agent_timeout(), Millis(1000)), "the heartbeat");
  return judge(seen, now) && !node_lost();
}

bool Heartbeat::judge(const NodesSeen& seen, Clock::time_point now) {
  if (seen.failed) {
    why_ = read_failure();
    return false;
  }
  if (seen.waiting > 0) {
    why_ = std::to_string(seen.waiting) + " node(s) wait to join";
    return false;
  }
  for (int r : asked_)
    if (std::find(seen.quit_unjoined.begin(), seen.quit_unjoined.end(), r) == seen.quit_unjoined.end())
      joined_.insert(r);
  asked_.clear();
  if (!seen.quit_unjoined.empty() && seen.joining > 0) {
    why_ = "rank " + std::to_string(seen.quit_unjoined.front()) +
           " exited with code 0 before joining the process group; the ranks that joined would wait "
           "for it until their timeout";
    quit_unjoined_ = true;
    publish_failure(why_);
    return false;
  }
  if (seen.beats.empty()) return true;
  if (beats_.empty()) beats_.assign(a_.nnodes, {-1, now});
  for (int n = 0; n < a_.nnodes; ++n) {
    if (n == a_.node_rank) continue;
    if (seen.beats[n] != beats_[n].first) {
      beats_[n] = {seen.beats[n], now};
    } else if (now - beats_[n].second > agent_timeout()) {
      why_ = "the agent of node " + std::to_string(n) + " stopped responding for " + seconds(a_.agent_timeout_s) +
             " s";
      publish_failure(why_);
      tell_workers("node " + std::to_string(n) + " is lost: its agent's heartbeat stopped for " +
                       seconds(a_.agent_timeout_s) + " s (ddprun --agent-timeout)",
                   now);
      return true;
    }
  }
  return true;
}

void Heartbeat::tell_workers(const std::string& why, Clock::time_point now) {
  // The payload a group's own abort carries: status, then the message.
  const std::string payload = std::to_string(static_cast<int>(ddp::core::Status::PeerFailed)) + "|" + why;
  RoundStore job = job_;
  try {
    calls_.call([job, payload] { job->set("abort", ddp::core::Bytes(payload.begin(), payload.end())); },
                std::min(std::max(agent_timeout(), Millis(1000)), Millis(5000)), "telling the workers");
  } catch (...) {
    // The store is unreachable: the workers cannot hear it either; they are stopped below.
  }
  // A worker polls the key every 100 ms and its wait every few hundred.
  workers_told_until_ = now + std::chrono::seconds(2);
}

void Heartbeat::publish_failure(const std::string& why) {
  RoundStore round = round_;
  try {
    calls_.call([round, why] { round->set("failed", ddp::core::Bytes(why.begin(), why.end())); },
                std::min(std::max(agent_timeout(), Millis(1000)), Millis(5000)), "publishing the failure");
  } catch (...) {
    // The store is gone or unreachable: nobody is left to tell.
  }
}

std::string Heartbeat::read_failure() {
  RoundStore round = round_;
  try {
    auto v = calls_.call([round] { return round->get("failed"); }, std::max(agent_timeout(), Millis(1000)),
                         "reading the failure");
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    return std::string("lost the rendezvous store: ") + e.what();
  }
}

}  // namespace ddprun
