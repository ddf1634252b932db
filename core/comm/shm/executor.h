// Runs one backend's collectives in call order. A small one runs on the
// caller's thread when nothing is queued (handing it to a thread would cost
// more than it takes); a large one goes to a worker thread, so that the
// caller (a DDP backward pass launching a bucket) moves on while it runs,
// unless the executor was made to run everything on the caller's thread:
// where the host's ranks leave no core to spare, a worker only takes turns
// with the caller on the same cores and adds the hand-off.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ddp::core::shm {

class Executor {
 public:
  explicit Executor(bool inline_always = false);
  // Lets queued collectives finish (each bounded by its own deadline), then
  // joins the worker.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `body` performs the collective; what it throws becomes the work's
  // failure. `result` is what the work (and its future) hold when done.
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, std::vector<at::Tensor> result, size_t bytes,
                                        std::function<void()> body);

  // For a blocking call: performs `body` on the caller's thread at once and
  // returns true when nothing is queued or running before it (whatever its
  // size: the caller waits either way); otherwise returns false, having done
  // nothing. What `body` throws goes to the caller.
  template <typename Body>
  bool run_now(Body&& body) {
    if (!claim_idle()) return false;
    struct Done {
      Executor& e;
      ~Done() { e.finish_inline(); }
    } done{*this};
    body();
    return true;
  }

 private:
  struct Job;
  void work_loop();
  // Ends a collective performed on the caller's thread: a job queued
  // meanwhile may start.
  void finish_inline();
  // Marks a collective running where none runs or is queued: one atomic
  // operation, no lock (a 4-byte collective's lock and unlock of mutex_
  // twice were about 130 of its 1,000 instructions).
  bool claim_idle() {
    uint32_t idle = 0;
    return state_.compare_exchange_strong(idle, kRunning, std::memory_order_acquire);
  }

  // state_: kRunning while a collective is performed (inline or on the
  // worker), plus kQueued per job in queue_. A job is counted before it is
  // queued, both under mutex_, so claim_idle() never overtakes it; only
  // the worker starts a queued job, and only once kRunning is clear.
  static constexpr uint32_t kRunning = 1, kQueued = 2;
  std::atomic<uint32_t> state_{0};
  std::mutex mutex_;  // guards queue_, stopping_ and the worker's start; with changed_, its wake-ups
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Job>> queue_;
  const bool inline_always_;
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ddp::core::shm
