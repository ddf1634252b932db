#include "elastic.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <thread>

#include "common/error.h"

namespace ddprun {
using ddp::core::Bytes;
using ddp::core::KeyStore;
using ddp::core::Status;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::milliseconds kPoll{50};

Bytes number(int64_t n) {
  std::string s = std::to_string(n);
  return Bytes(s.begin(), s.end());
}

// The count a round's key holds (a round's size or number), from 0 to
// INT32_MAX. Agents write only such numbers; anything else came from another
// process that reached the store (its port is open to anyone), and is
// named, where std::stoll said only "stoll", or took a negative or huge
// count for the round's size.
int number_of(const Bytes& b, const char* key) {
  constexpr int64_t lo = 0, hi = INT32_MAX;
  const std::string s(b.begin(), b.end());
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (!s.empty() && *end == '\0' && errno == 0 && v >= lo && v <= hi) return static_cast<int>(v);
  std::string shown;
  for (char c : s.substr(0, 40)) shown += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  if (s.size() > 40) shown += "...";
  ddp::core::fail(Status::State, std::string("the rendezvous store's key '") + key + "' holds '" + shown +
                                     "', not a number from " + std::to_string(lo) + " to " + std::to_string(hi) +
                                     " (did a process other than ddprun write to the store?)");
}

}  // namespace

std::optional<Admission> join_elastic_round(KeyStore& round, const ElasticRound& r) {
  const int64_t me = round.add("arrived", 1);  // 1-based order of arrival
  const auto deadline = Clock::now() + r.timeout;
  int64_t closed = 0;
  if (r.closer) {
    // Close at MAX, or at MIN or more once no one else came for last_call.
    int64_t seen = me;
    auto changed = Clock::now();
    for (;;) {
      const int64_t now_there = round.add("arrived", 0);
      if (now_there != seen) seen = now_there, changed = Clock::now();
      if (seen >= r.max_nodes || (seen >= r.min_nodes && Clock::now() - changed >= r.last_call)) {
        closed = std::min<int64_t>(seen, r.max_nodes);
        round.set("closed", number(closed));
        break;
      }
      if (Clock::now() >= deadline)
        ddp::core::fail(Status::Timeout, "elastic rendezvous at " + r.where + " timed out after " +
                                             std::to_string(r.timeout.count()) + " ms: " + std::to_string(seen) +
                                             " node(s) came, at least " + std::to_string(r.min_nodes) + " needed");
      std::this_thread::sleep_for(kPoll);
    }
  } else {
    while (!round.check({"closed"})) {
      if (Clock::now() >= deadline)
        ddp::core::fail(Status::Timeout, "elastic rendezvous at " + r.where + " timed out after " +
                                             std::to_string(r.timeout.count()) + " ms: the round did not close (" +
                                             std::to_string(round.add("arrived", 0)) + " node(s) came, at least " +
                                             std::to_string(r.min_nodes) + " needed; is node 0 running?)");
      std::this_thread::sleep_for(kPoll);
    }
    closed = number_of(round.get("closed"), "closed");
    if (closed == 0) {
      round.add("told", 1);  // the closer waits for this before its store goes away
      return Admission{0, 0};
    }
  }
  if (me > closed) {
    round.add("waiting", 1);
    return std::nullopt;
  }
  return Admission{static_cast<int>(me - 1), static_cast<int>(closed)};
}

void close_round_for_good(KeyStore& round, std::chrono::milliseconds bound) {
  round.set("closed", number(0));
  const auto deadline = Clock::now() + bound;
  while (round.add("told", 0) < round.add("arrived", 0) && Clock::now() < deadline) std::this_thread::sleep_for(kPoll);
}

int64_t nodes_waiting(KeyStore& round) { return round.add("waiting", 0); }

int newest_round(KeyStore& job) {
  return job.check({"open_round"}) ? number_of(job.get("open_round"), "open_round") : 0;
}

void open_round(KeyStore& job, int round) { job.set("open_round", number(round)); }

}  // namespace ddprun
