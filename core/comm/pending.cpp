// Waiting for c10d work without ever hanging: the wait is cut into short
// slices; between them the rank checks its deadline and asks the store
// whether another rank already failed (a peer two hops away from a dead rank
// would otherwise block until the backend's own timeout).
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <algorithm>

#include "comm/collectives.h"
#include "comm/failure.h"
#include "comm/gloo_guard.h"
#include "common/error.h"

namespace ddp::core {
namespace {
constexpr Millis kWaitSlice{100};

std::string who(Group& g) {
  return "rank " + std::to_string(g.rank()) + " of " + std::to_string(g.size());
}
}  // namespace

Pending::Pending(Group& group, std::string op, c10::intrusive_ptr<c10d::Work> work, Step then,
                 flight::Ticket ticket)
    : group_(group), op_(std::move(op)), work_(std::move(work)), then_(std::move(then)), ticket_(ticket) {}

void Pending::record_end(flight::State s) {
  if (recorded_end_) return;
  recorded_end_ = true;
  flight::finish(ticket_, s);
}

Pending::~Pending() {
  if (!holds_caller_memory_ || !work_ || work_->isCompleted()) return;
  // A backend of libddp's own performs it (DirectCollectives::performs_*):
  // it ends within the group's timeout of its first wait, unless calls
  // queued before it took their own; then the group is broken, which ends
  // it (and those) at their next wait.
  const auto until = Clock::now() + group_.timeout();
  while (!work_->isCompleted() && Clock::now() < until) {
    try {
      work_->wait(kWaitSlice);
    } catch (...) {  // its slice ran out, or it failed: isCompleted says which
    }
  }
  if (work_->isCompleted()) return;
  try {
    group_.fail_and_publish(Status::Timeout, op_ + " on " + who(group_) + ": its work, freed unwaited on caller "
                                                  "memory, did not end within the group's timeout");
  } catch (...) {  // the group is broken, and its backend settled
  }
}

bool Pending::test() {
  if (done_) return true;
  bool finished = !work_ || work_->isCompleted();
  // A collective with no host step left is over once its work is.
  if (finished && !then_) record_end(failure() ? flight::State::Failed : flight::State::Completed);
  return finished;
}

std::exception_ptr Pending::failure() const {
  return work_ && work_->isCompleted() ? work_->exception() : nullptr;
}

bool Pending::order_on_stream() {
  if (then_ || done_) return false;
  if (work_) work_->synchronize();
  return true;
}

void Pending::wait(std::optional<Millis> timeout) {
  if (done_) return;
  Millis budget = timeout.value_or(group_.timeout());
  if (budget.count() < 0) fail(Status::InvalidArgument, op_ + ": negative timeout");
  if (budget > kMaxTimeout)
    fail(Status::InvalidArgument, op_ + ": timeout " + std::to_string(budget.count()) + " ms exceeds the maximum of " +
                                      std::to_string(kMaxTimeout.count()) + " ms");
  const auto now = Clock::now();
  auto deadline = now + budget;
  flight::waiting(ticket_);
  try {
    if (work_) wait_work(work_, deadline);
    if (then_) {
      Step step = std::move(then_);
      then_ = nullptr;
      step(*this, deadline);
    }
  } catch (...) {
    record_end(flight::State::Failed);
    throw;
  }
  done_ = true;
  record_end(flight::State::Completed);
}

void Pending::wait_work(const c10::intrusive_ptr<c10d::Work>& work, Clock::time_point deadline) {
  // A work that is over already (a small shm collective runs on the
  // caller's thread) needs neither a timed wait nor its clock reads; its
  // stream order is what wait() would still add.
  if (work->isCompleted()) {
    if (std::exception_ptr failure = work->exception()) throw_failure(failure);
    work->synchronize();
    return;
  }
  const uint64_t gloo_failures_before = gloo_failures();
  for (;;) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    Millis slice = std::max(Millis(1), std::min(kWaitSlice, left));
    std::exception_ptr failure;
    bool finished = false;
    try {
      work->wait(slice);
      finished = true;
    } catch (...) {
      // Either our slice ran out ("Operation timed out!", work not complete)
      // or the operation itself failed (work complete, exception set). A
      // work may also complete between its slice running out and this
      // check: then it is asked once more, and its own answer counts.
      if (work->isCompleted()) {
        failure = work->exception();
        if (!failure) {
          try {
            work->wait(Millis(1));
            finished = true;
          } catch (...) {
            failure = std::current_exception();
          }
        }
      }
    }
    if (failure) throw_failure(failure);
    if (finished) return;
    if (gloo_failures() != gloo_failures_before) {
      record_end(flight::State::Failed);
      group_.fail_and_publish(Status::PeerFailed,
                              op_ + " failed on " + who(group_) + ": Gloo's transport failed (" + last_gloo_failure() +
                                  "); most likely the ranks called this collective with different sizes "
                                  "(DDP_DEBUG=DETAIL checks every call)");
    }
    if (group_.peer_reported()) record_end(flight::State::Failed);
    group_.throw_if_peer_reported();
    if (Clock::now() >= deadline) throw_timeout("");
  }
}

void Pending::throw_failure(std::exception_ptr failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const CallMismatch& e) {
    record_end(flight::State::Failed);
    group_.record_call_mismatch(e.what());
    throw;
  } catch (const std::exception& e) {
    // A timeout or a dead peer breaks the group and is published, also
    // when a backend of ours (shm) classified it already as an Error;
    // any other Error goes up as it is.
    Status s = classify_exception(e);
    record_end(s == Status::Timeout ? flight::State::TimedOut : flight::State::Failed);
    std::string msg = op_ + " failed on " + who(group_) + ": " + short_what(e);
    if (s == Status::Timeout || s == Status::PeerFailed) {
      group_.throw_root_cause_if_reported();
      group_.fail_and_publish(s, msg);
    }
    if (dynamic_cast<const Error*>(&e)) throw;
    fail(s, msg);
  }
}

void Pending::throw_timeout(const std::string& context) {
  record_end(flight::State::TimedOut);
  group_.throw_root_cause_if_reported();
  group_.fail_and_publish(Status::Timeout, op_ + " timed out on " + who(group_) + context +
                                               " (a peer is slow, stopped, or did not call the same collective)");
}

}  // namespace ddp::core
