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
#include <chrono>
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

  // Waits until no job runs on the worker or is queued, or until
  // `deadline`; returns at once on the worker itself (a job's own failure
  // may end up here). The caller must have made the queued jobs end quickly
  // (their bodies fail first thing once the backend is aborted).
  void settle(std::chrono::steady_clock::time_point deadline);

  // Whether this thread is the executor's worker.
  bool on_worker() const;

  // For a blocking call: performs `body` on the caller's thread at once and
  // returns true when nothing is queued or running before it (whatever its
  // size: the caller waits either way); otherwise returns false, having done
  // nothing. What `body` throws goes to the caller.
  template <typename Body>
  bool run_now(Body&& body) {
    if (!claim_idle(false)) return false;
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
  // meanwhile may start. No locked instruction where nothing is queued: it
  // follows the collective's last stores to shared memory, and a full
  // fence there waits for the peer's core to give those lines back.
  void finish_inline() { release_inline(false); }
  // `holding_mutex`: the caller holds mutex_ (submit()), so the worker is
  // not between its check and its wait.
  void release_inline(bool holding_mutex);
  // Marks a collective running on the caller's thread where none runs or
  // is queued: no lock (a 4-byte collective's lock and unlock of mutex_
  // twice were about 130 of its 1,000 instructions). On failure the caller
  // has released what it marked.
  bool claim_idle(bool holding_mutex) {
    if (inline_.exchange(1, std::memory_order_seq_cst) != 0) return false;  // another thread's
    if (state_.load(std::memory_order_seq_cst) == 0) return true;
    release_inline(holding_mutex);
    return false;
  }
  // Whether no collective runs on a caller's thread, for the worker (under
  // mutex_, after the job was counted in state_).
  bool inline_idle() const;

  // inline_: 1 while a collective runs on a caller's thread (claim_idle to
  // finish_inline). state_: kRunning while the worker performs a job, plus
  // kQueued per job in queue_, changed only under mutex_. The claim stores
  // inline_ and then reads state_; the worker's job was counted in state_
  // before it reads inline_: each side sees the other (full fences on
  // both). finish_inline stores inline_ and then reads state_ with a light
  // fence; a worker that found inline_ set makes the heavy fence before it
  // waits (common/asymmetric_fence.h), so that either it sees inline_
  // clear or finish_inline sees the job and wakes it.
  static constexpr uint32_t kRunning = 1, kQueued = 2;
  std::atomic<uint32_t> inline_{0};
  std::atomic<uint32_t> state_{0};
  const bool asymmetric_;  // asymmetric_fences(FenceScope::Process)
  std::mutex mutex_;  // guards queue_, stopping_ and the worker's start; with changed_, its wake-ups
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Job>> queue_;
  const bool inline_always_;
  bool stopping_ = false;
  std::thread worker_;
  std::atomic<std::thread::id> worker_id_{};  // set by the worker itself, first thing
};

}  // namespace ddp::core::shm
