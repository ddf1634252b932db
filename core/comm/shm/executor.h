// Runs one backend's collectives in call order. A small one runs on the
// caller's thread when nothing is queued (handing it to a thread would cost
// more than it takes); a large one goes to a worker thread, so that the
// caller (a DDP backward pass launching a bucket) moves on while it runs.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

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
  Executor();
  // Lets queued collectives finish (each bounded by its own deadline), then
  // joins the worker.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `body` performs the collective; what it throws becomes the work's
  // failure. `result` is what the work (and its future) hold when done.
  c10::intrusive_ptr<c10d::Work> submit(c10d::OpType type, std::vector<at::Tensor> result, size_t bytes,
                                        std::function<void()> body);

 private:
  struct Job;
  void work_loop();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<Job>> queue_;
  bool running_ = false;  // a collective is being performed (inline or on the worker)
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace ddp::core::shm
