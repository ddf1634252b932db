// Store calls an agent can give up on. A store call to a host that is
// stopped or cut off blocks in a socket wait for the client's whole timeout
// (the rendezvous timeout), and no signal handler can interrupt it; an agent must still end its job
// within --agent-timeout and act on SIGTERM at once. So each call runs on a
// thread of its own while the caller waits for it, at most for its bound and
// at most about a second after a stop signal. A call given up on may still
// hold the connection, so the store then counts as lost: every later call
// fails at once instead of queueing behind it.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "common/error.h"

namespace ddprun {

using ddp::core::fail;
using ddp::core::Status;

using Millis = std::chrono::milliseconds;

class BoundedStore {
 public:
  // `stop` is the agent's stop-signal number (0 while none arrived).
  explicit BoundedStore(const std::atomic<int>* stop) : stop_(stop) {}

  // Starts fn() on its own thread; its future holds the result or what it
  // threw. Fails at once when the store was lost.
  template <typename F>
  auto start(F fn, const std::string& what) -> std::future<decltype(fn())> {
    using R = decltype(fn());
    if (lost_.load()) fail(Status::PeerFailed, what + ": the store was lost earlier (" + why_lost_ + ")");
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto result = task->get_future();
    std::thread([task] { (*task)(); }).detach();  // owns everything it touches
    return result;
  }

  // Runs fn() on its own thread and returns its result, or rethrows what it
  // threw. Throws Status::Timeout naming `what` when `bound` passes first, and
  // Status::State when a stop signal arrives and the call still has not
  // returned a second later; either way the store is lost from then on.
  template <typename F>
  auto call(F fn, Millis bound, const std::string& what) -> decltype(fn()) {
    auto result = start(std::move(fn), what);
    if (!wait(result, bound)) {
      bool stopped = stop_ && stop_->load();
      abandon(what + (stopped ? " was still waiting for the store when a stop signal came"
                              : " got no answer from the store within " + std::to_string(bound.count()) + " ms"));
      fail(stopped ? Status::State : Status::Timeout, why_lost_);
    }
    return result.get();
  }

  // A call is given up on: the store counts as lost from now on.
  void abandon(const std::string& why) {
    if (lost_.load()) return;
    why_lost_ = why;
    lost_.store(true);
  }

  bool lost() const { return lost_.load(); }

 private:
  template <typename R>
  bool wait(std::future<R>& result, Millis bound) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    bool stop_seen = false;
    for (;;) {
      auto now = std::chrono::steady_clock::now();
      if (!stop_seen && stop_ && stop_->load()) {
        stop_seen = true;
        deadline = std::min(deadline, now + std::chrono::seconds(1));
      }
      if (now >= deadline) return false;
      auto slice = std::min<std::chrono::steady_clock::duration>(deadline - now, Millis(20));
      if (result.wait_for(slice) == std::future_status::ready) return true;
    }
  }

  const std::atomic<int>* stop_;
  std::atomic<bool> lost_{false};
  std::string why_lost_;  // written once, before lost_ is set; one thread (the agent's) calls abandon
};

}  // namespace ddprun
