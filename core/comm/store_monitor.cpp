#include "comm/store_monitor.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <pthread.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "comm/failure.h"
#include "comm/rendezvous.h"

namespace ddp::core {
namespace {
constexpr Millis kPollInterval{100};
// How long the end of a monitor waits for its watcher to stop by itself
// (a store call in progress, a failure's publish perhaps, to finish), and
// then for it to leave once its connection is shut down.
constexpr Millis kStopWait{500};
constexpr Millis kShutDownWait{1000};
// What the watcher thread is called (in /proc, top, gdb).
constexpr const char* kWatcherName = "ddp-store-watch";
}  // namespace

std::string failure_report(Status status, const std::string& message) {
  return std::to_string(static_cast<int>(status)) + "|" + message;
}

std::pair<Status, std::string> parse_report(const std::string& report) {
  auto bar = report.find('|');
  if (bar == std::string::npos) return {Status::PeerFailed, report};
  // Only an error status is taken: the key may have been written by any
  // process that reached the store, and "0|..." made the ranks stop with
  // Status::Ok, which the C API returned as DDP_OK for a call that failed.
  Status status = Status::PeerFailed;
  const std::string code = report.substr(0, bar);
  char* end = nullptr;
  const long v = std::strtol(code.c_str(), &end, 10);
  if (!code.empty() && *end == '\0' && is_error_status(v)) status = static_cast<Status>(v);
  return {status, report.substr(bar + 1)};
}

Error reported_failure(const std::string& report) {
  auto [status, message] = parse_report(report);
  return Error(status, "another rank failed, so this one stops too: " + message);
}

struct StoreMonitor::State {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Store> job;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  bool exited = false;
  bool poll_now = false;
  uint64_t polls_done = 0;
  std::optional<std::string> to_publish;
  uint64_t published = 0, publish_requests = 0;
  std::optional<std::string> reported;
  std::optional<std::string> lost;
  bool lost_by_timeout = false;
  // When the watcher's store call in progress began; unset between calls.
  std::optional<std::chrono::steady_clock::time_point> call_began;
};

namespace {

// Whether the watcher's store call in progress has already taken longer than
// `bound`: its host is stopped or stalled (a store answers in microseconds),
// and the call may last until the connection's bound, the group's timeout
// when the call began. Waiting `bound` more for it would only make a
// caller's failure arrive late, after a timeout set lower since (a group's
// set_timeout); what the caller asked for stays queued for the watcher.
bool watcher_stalled(const StoreMonitor::State& s, Millis bound) {
  return s.call_began && std::chrono::steady_clock::now() - *s.call_began >= bound;
}

// The watcher's loop: every store call happens here, outside any lock.
void watch(std::shared_ptr<StoreMonitor::State> s) {
  std::unique_lock<std::mutex> lock(s->m);
  while (!s->stop && !s->lost) {
    std::optional<std::string> payload = std::move(s->to_publish);
    s->to_publish.reset();
    uint64_t request = s->publish_requests;
    s->poll_now = false;
    s->call_began = std::chrono::steady_clock::now();
    lock.unlock();
    std::optional<std::string> seen, lost;
    bool by_timeout = false;
    try {
      if (payload) s->store->set("abort", std::vector<uint8_t>(payload->begin(), payload->end()));
      for (auto* where : {&s->store, &s->job}) {
        if (seen || !*where || !(*where)->check({"abort"})) continue;
        auto v = (*where)->get("abort");
        seen = std::string(v.begin(), v.end());
      }
    } catch (const std::exception& e) {
      // A wait that timed out is tried again next round; anything else means
      // the connection is gone (and closed), a host that did not answer
      // within the bound included.
      by_timeout = read_timed_out(e);
      if (by_timeout || classify_exception(e) != Status::Timeout) lost = short_what(e);
    }
    lock.lock();
    s->call_began.reset();
    if (payload) s->published = request;
    if (seen) s->reported = seen;
    if (lost) {
      s->lost = lost;
      s->lost_by_timeout = by_timeout;
    }
    ++s->polls_done;
    s->cv.notify_all();
    s->cv.wait_for(lock, kPollInterval, [&] { return s->stop || s->poll_now || s->to_publish; });
  }
  s->exited = true;
  s->cv.notify_all();
}

}  // namespace

StoreMonitor::StoreMonitor(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Store> job)
    : s_(std::make_shared<State>()) {
  s_->store = std::move(store);
  s_->job = std::move(job);
  owner_ = getpid();
  watcher_ = std::thread(watch, s_);
  // Named here, not by the thread itself, so that it has its name once the
  // group is made.
  pthread_setname_np(watcher_.native_handle(), kWatcherName);
}

StoreMonitor::~StoreMonitor() {
  if (getpid() != owner_) {
    // A forked child's copy: its watcher was not forked, and the connection
    // is still the parent's.
    watcher_.detach();
    return;
  }
  std::unique_lock<std::mutex> lock(s_->m);
  s_->stop = true;
  s_->cv.notify_all();
  if (!s_->cv.wait_for(lock, kStopWait, [&] { return s_->exited; })) {
    // In a store call that does not end: its host is stopped or stalled,
    // and the call could last until the connection's bound (the
    // group's timeout). The connection is this monitor's alone (a group's
    // connect_monitor): shutting it down ends the call now.
    lock.unlock();
    shut_down_connection(*s_->store);
    lock.lock();
    s_->cv.wait_for(lock, kShutDownWait, [&] { return s_->exited; });
  }
  const bool exited = s_->exited;
  lock.unlock();
  // A watcher still in a call (which a shut-down socket should not allow)
  // is left to end on its own: it owns a reference to the state.
  if (exited) watcher_.join();
  else watcher_.detach();
}

std::optional<std::string> StoreMonitor::reported() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return s_->reported;
}

bool StoreMonitor::lost_by_timeout() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return s_->lost_by_timeout;
}

std::function<std::optional<std::string>()> StoreMonitor::reporter() const {
  return [s = s_]() -> std::optional<std::string> {
    std::lock_guard<std::mutex> lock(s->m);
    return s->reported;
  };
}

std::optional<std::string> StoreMonitor::lost() const {
  std::lock_guard<std::mutex> lock(s_->m);
  return s_->lost;
}

std::optional<std::string> StoreMonitor::refresh(Millis bound) {
  std::unique_lock<std::mutex> lock(s_->m);
  // The poll in progress may have started before the event we ask about.
  uint64_t target = s_->polls_done + 2;
  s_->poll_now = true;
  s_->cv.notify_all();
  if (watcher_stalled(*s_, bound)) return s_->reported;
  s_->cv.wait_for(lock, bound, [&] { return s_->polls_done >= target || s_->exited; });
  return s_->reported;
}

namespace {

void publish_through(StoreMonitor::State& s, const std::string& payload, Millis bound) {
  std::unique_lock<std::mutex> lock(s.m);
  if (s.exited) return;
  s.to_publish = payload;
  uint64_t request = ++s.publish_requests;
  s.cv.notify_all();
  if (watcher_stalled(s, bound)) return;
  s.cv.wait_for(lock, bound, [&] { return s.published >= request || s.exited; });
}
}  // namespace

void StoreMonitor::publish(const std::string& payload, Millis bound) { publish_through(*s_, payload, bound); }

std::function<void(const std::string&, Millis)> StoreMonitor::publisher() const {
  return [s = s_](const std::string& payload, Millis bound) { publish_through(*s, payload, bound); };
}

}  // namespace ddp::core