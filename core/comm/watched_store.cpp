#include "comm/watched_store.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

#include "comm/failure.h"
#include "comm/rendezvous.h"
#include "comm/store_monitor.h"
#include "common/error.h"

namespace ddp::core {
namespace {
// A wait returns as soon as its keys exist, so the slice only bounds how
// late a peer's report is seen; each slice costs one store round trip.
constexpr Millis kSlice{100};
}  // namespace

WatchedPrefixStore::WatchedPrefixStore(std::string prefix, c10::intrusive_ptr<c10d::Store> store, Report report)
    : c10d::PrefixStore(std::move(prefix), std::move(store)), report_(std::move(report)) {}

template <typename Call>
auto WatchedPrefixStore::answered(const std::vector<std::string>& keys, const Call& call) -> decltype(call()) {
  try {
    return call();
  } catch (const c10::DistNetworkError& e) {
    const std::string awaited = joinKeys(keys).front();
    if (read_timed_out(e))
      fail(Status::Timeout, "the rendezvous store did not answer within " + std::to_string(getTimeout().count()) +
                                " ms while this rank waited for " + awaited +
                                " (is its host, rank 0 or the launcher, stopped?): " + short_what(e));
    fail(Status::PeerFailed, "the rendezvous store's host (rank 0 or the launcher) went away while this rank waited for " +
                                 awaited + ": " + short_what(e));
  }
}

std::vector<uint8_t> WatchedPrefixStore::get(const std::string& key) {
  wait({key});
  return answered({key}, [&] { return c10d::PrefixStore::get(key); });
}

std::vector<std::vector<uint8_t>> WatchedPrefixStore::multiGet(const std::vector<std::string>& keys) {
  wait(keys);
  return answered(keys, [&] { return c10d::PrefixStore::multiGet(keys); });
}

void WatchedPrefixStore::wait(const std::vector<std::string>& keys) { wait(keys, getTimeout()); }

void WatchedPrefixStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  using Clock = std::chrono::steady_clock;
  if (keys.empty()) return;
  const bool forever = timeout == c10d::Store::kNoTimeout;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (report_)
      if (auto r = report_()) throw reported_failure(*r);
    Millis slice = kSlice;
    if (!forever) slice = std::min(slice, std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    if (slice <= Millis(0))
      C10_THROW_ERROR(DistStoreError, "wait timeout after " + std::to_string(timeout.count()) + "ms, keys: " +
                                          joinKeys(keys).front() + (keys.size() > 1 ? " and others" : ""));
    try {
      // A slice that ends is retried; a host that does not answer is not.
      answered(keys, [&] { c10d::PrefixStore::wait(keys, slice); });
      return;
    } catch (const c10::DistStoreError& e) {
      if (classify_exception(e) != Status::Timeout) throw;
    }
  }
}

}  // namespace ddp::core
