#include "comm/shm/executor.h"

#include <ATen/core/ivalue.h>

#include "common/asymmetric_fence.h"

namespace ddp::core::shm {
namespace {

// Up to this size a collective runs on the caller's thread when nothing is
// queued before it: handing it to the worker costs about 100 us on our
// 2-core machines (bench/run_shm.sh at 1 MiB: 158 us through the worker,
// about 60 us inline), a 4 MiB all-reduce about 250 us.
constexpr size_t kInlineBytes = size_t{4} << 20;

// Its future is made only when someone asks for it (DDP's reducer and comm
// hooks do; a blocking collective does not): making one allocates a type
// and a list, a third of a 4-byte all-reduce's own cost.
class ShmWork final : public c10d::Work {
 public:
  ShmWork(c10d::OpType type, std::vector<at::Tensor> result) : Work(-1, type), result_(std::move(result)) {}
  void complete(std::exception_ptr failure) {
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    {
      std::lock_guard<std::mutex> lock(future_mutex_);
      done_ = true;
      failure_ = failure;
      fut = fut_;
    }
    if (fut) settle(*fut);
    finish(failure);
  }
  std::vector<at::Tensor> result() override { return result_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    std::lock_guard<std::mutex> lock(future_mutex_);
    if (!fut_) {
      fut_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
      if (done_) settle(*fut_);  // complete() ran before anyone asked
    }
    return fut_;
  }

 private:
  void settle(c10::ivalue::Future& fut) {
    if (failure_) fut.setError(failure_);
    else fut.markCompleted(c10::IValue(result_));
  }

  std::vector<at::Tensor> result_;
  std::mutex future_mutex_;
  bool done_ = false;
  std::exception_ptr failure_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
};

void perform(ShmWork& work, const std::function<void()>& body) {
  std::exception_ptr failure;
  try {
    body();
  } catch (...) {
    failure = std::current_exception();
  }
  work.complete(failure);
}

}  // namespace

struct Executor::Job {
  c10::intrusive_ptr<ShmWork> work;
  std::function<void()> body;
};

Executor::Executor(bool inline_always)
    : asymmetric_(asymmetric_fences(FenceScope::Process)), inline_always_(inline_always) {}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

c10::intrusive_ptr<c10d::Work> Executor::submit(c10d::OpType type, std::vector<at::Tensor> result, size_t bytes,
                                                std::function<void()> body) {
  auto work = c10::make_intrusive<ShmWork>(type, std::move(result));
  std::unique_lock<std::mutex> lock(mutex_);
  if ((bytes <= kInlineBytes || inline_always_) && claim_idle(true)) {
    lock.unlock();
    perform(*work, body);
    finish_inline();
    return work;
  }
  state_.fetch_add(kQueued);
  queue_.push_back(std::make_unique<Job>(Job{work, std::move(body)}));
  if (!worker_.joinable()) worker_ = std::thread([this] { work_loop(); });
  lock.unlock();
  changed_.notify_all();
  return work;
}

bool Executor::on_worker() const { return worker_id_.load(std::memory_order_relaxed) == std::this_thread::get_id(); }

void Executor::settle(std::chrono::steady_clock::time_point deadline) {
  if (on_worker()) return;
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_until(lock, deadline, [&] { return queue_.empty() && !(state_.load() & kRunning); });
}

void Executor::release_inline(bool holding_mutex) {
  inline_.store(0, std::memory_order_release);
  light_fence(asymmetric_);
  // Only a queued job waits for this one (the worker). Taking the mutex
  // before the notify means the worker either has not yet read inline_ or
  // already waits.
  if (state_.load(std::memory_order_relaxed) == 0) return;
  if (!holding_mutex) {
    std::lock_guard<std::mutex> lock(mutex_);
  }
  changed_.notify_all();
}

bool Executor::inline_idle() const {
  if (inline_.load(std::memory_order_seq_cst) == 0) return true;
  // About to wait for it: the heavy fence makes finish_inline's store and
  // load ordered, so that it sees this job counted or this reads 0.
  heavy_fence(FenceScope::Process);
  return inline_.load(std::memory_order_seq_cst) == 0;
}

void Executor::work_loop() {
  worker_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] {
      return (!queue_.empty() && !(state_.load() & kRunning) && inline_idle()) || (stopping_ && queue_.empty());
    });
    if (queue_.empty()) return;  // stopping
    std::unique_ptr<Job> job = std::move(queue_.front());
    queue_.pop_front();
    // Nobody runs a collective inline while a job is counted (claim_idle
    // needs state_ at 0): one queued job becomes the running one.
    state_.fetch_sub(kQueued - kRunning);
    lock.unlock();
    perform(*job->work, job->body);
    lock.lock();
    state_.fetch_sub(kRunning);
    changed_.notify_all();
  }
}

}  // namespace ddp::core::shm
