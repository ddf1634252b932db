// Watches a group's "abort" key from a thread of its own, and writes it
// there too, so that no wait loop ever blocks on the store: a stopped or
// unreachable store host stalls the watcher, never the caller, and every
// wait stays bounded by its own deadline.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "comm/group.h"
#include "common/error.h"

namespace ddp::core {

// The abort key's value: a failure's status and its message, which names the
// rank ("rank R: ..."). What a rank publishes, and what the others read.
std::string failure_report(Status status, const std::string& message);
// The status and message of a report; Status::PeerFailed when it has none.
std::pair<Status, std::string> parse_report(const std::string& report);
// The error a rank stops with when another rank's report is the root cause:
// the report's status, and its message after "another rank failed, ...".
Error reported_failure(const std::string& report);

class StoreMonitor {
 public:
  // `store` is a connection of the monitor's own (prefixed for the group).
  // `job`, when given, is the same connection prefixed for the whole job:
  // its "abort" key is read too (never written), which is where a launcher
  // that lost a node tells every group of the job.
  explicit StoreMonitor(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> job = {});
  // Stops the watcher and waits for it to leave. One stuck in a store call
  // (a stopped store host) is ended by shutting the connection down, which
  // must be this monitor's alone; this blocks for at most about a second.
  ~StoreMonitor();
  StoreMonitor(const StoreMonitor&) = delete;
  StoreMonitor& operator=(const StoreMonitor&) = delete;

  // What another rank published, as of the last poll (no store access).
  std::optional<std::string> reported() const;
  // reported() as a function that stays valid after the monitor is gone
  // (then it says what was last seen), for a backend that waits by itself.
  std::function<std::optional<std::string>()> reporter() const;
  // Why the store connection failed (its host died), if it did.
  std::optional<std::string> lost() const;
  // Whether it failed by not answering in time (its host stopped or
  // stalled: the connection's bound, comm/bounded_store.h) rather than by
  // closing.
  bool lost_by_timeout() const;
  // Polls now and waits up to `bound` for that poll; then reported().
  std::optional<std::string> refresh(Millis bound);
  // Writes `payload` to the abort key, waiting up to `bound` for the write.
  void publish(const std::string& payload, Millis bound);
  // publish() as a function that stays valid after the monitor is gone
  // (then it does nothing), for a backend that fails by itself.
  std::function<void(const std::string&, Millis)> publisher() const;

  struct State;

 private:
  std::shared_ptr<State> s_;
  std::thread watcher_;
  int owner_ = 0;  // the process that made it
};

}  // namespace ddp::core