#include "comm/stream_watch.h"


namespace ddp::core {
namespace {
constexpr Millis kLookEvery{50};
}

StreamWatch::StreamWatch(Group& group) : group_(group), thread_([this] { run(); }) {}

StreamWatch::~StreamWatch() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // A broken group's collectives may never finish: nothing to wait for.
  if (failure_ || group_.broken()) return;
  for (auto& w : watched_) {
    try {
      w.pending->wait();
    } catch (...) {
      // Reported by the group's next call, as for the reducer's own waits.
    }
  }
}

bool StreamWatch::device_orders(const Group& group) {
  return group.backend_name() == "nccl" && group.device().type == DeviceType::CUDA;
}

void StreamWatch::order(PendingPtr p) {
  throw_if_failed();
  if (!p->order_on_stream()) {
    p->wait();  // a host step remains: the host must run it
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  watched_.push_back({std::move(p), Clock::now() + group_.timeout()});
  wake_.notify_all();
}

void StreamWatch::throw_if_failed() {
  std::lock_guard<std::mutex> lock(mu_);
  if (failure_) throw *failure_;
}

size_t StreamWatch::in_flight() {
  std::lock_guard<std::mutex> lock(mu_);
  return watched_.size();
}

void StreamWatch::record(Status s, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!failure_) failure_.emplace(s, why);
  watched_.clear();
}

// Looks at the oldest collective (they finish in order on one stream) every
// kLookEvery; breaks the group as Pending::wait would, from this thread.
void StreamWatch::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    wake_.wait_for(lock, kLookEvery);
    while (!watched_.empty() && !failure_ && !stop_) {
      Watched& w = watched_.front();
      bool finished = w.pending->test();
      std::exception_ptr failed = finished ? w.pending->failure() : nullptr;
      bool late = !finished && Clock::now() >= w.deadline;
      if (finished && !failed) {
        watched_.pop_front();
        continue;
      }
      lock.unlock();
      try {
        if (failed) w.pending->throw_failure(failed);
        if (late) w.pending->throw_timeout(" while the device waited for it");
        group_.throw_if_peer_reported();
      } catch (const Error& e) {
        record(e.status(), e.what());
      } catch (const std::exception& e) {
        record(Status::Backend, e.what());
      }
      lock.lock();
      break;  // still running and in time: look again later
    }
  }
}

}  // namespace ddp::core
