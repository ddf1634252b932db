// c10d's own TCPStore wait reports nothing about who is missing; count_in does.
#include "store/meeting.h"

#include <algorithm>

#include "common/error.h"

namespace ddp::core {

namespace {
// How often a waiting rank asks its GiveUp.
constexpr std::chrono::milliseconds kGiveUpPoll{100};

// Waits for `key` up to `timeout`, in slices when there is a GiveUp to ask
// between them; throws Status::PeerFailed with its reason (*gave_up set).
void wait_or_give_up(KeyStore& store, const std::string& key, std::chrono::milliseconds timeout,
                     const std::string& where, const GiveUp& give_up, bool* gave_up) {
  if (!give_up) {
    store.wait({key}, timeout);
    return;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      store.wait({key}, std::max(std::chrono::milliseconds(1), std::min(left, kGiveUpPoll)));
      return;
    } catch (const Error& e) {
      if (e.status() != Status::Timeout || left <= kGiveUpPoll) throw;
    }
    if (auto why = give_up()) {
      *gave_up = true;
      fail(Status::PeerFailed, "rendezvous at " + where + ": " + *why);
    }
  }
}
}  // namespace

bool count_in(KeyStore& store, int size, std::chrono::milliseconds timeout, const std::string& where,
              const GiveUp& give_up) {
  int64_t arrived = store.add("arrived", 1);
  if (arrived > size)
    fail(Status::State, "rendezvous at " + where + ": " + std::to_string(arrived) +
                            " ranks arrived for a world of " + std::to_string(size) +
                            " (two jobs sharing MASTER_ADDR:MASTER_PORT?)");
  if (arrived == size) {
    store.set("complete", Bytes{1});
    return true;
  }
  bool gave_up = false;
  try {
    wait_or_give_up(store, "complete", timeout, where, give_up, &gave_up);
    return false;
  } catch (const Error& e) {
    if (gave_up) throw;
    if (e.status() == Status::Timeout) {
      int64_t now = -1;
      try {
        now = store.add("arrived", 0);
      } catch (...) {
      }
      if (now >= 0)
        fail(Status::Timeout, "rendezvous at " + where + " timed out after " + std::to_string(timeout.count()) +
                                  " ms: " + std::to_string(now) + " of " + std::to_string(size) + " ranks arrived");
      // The count cannot be read: the store's host gave up at its own
      // deadline, a moment before this rank's. The count this rank saw on
      // arriving may be older than the host's, so it is named as such.
      fail(Status::Timeout, "rendezvous at " + where + " timed out after " + std::to_string(timeout.count()) +
                                " ms, and the store hosted by rank 0 closed while this rank waited (rank 0 timed "
                                "out or died); when this rank arrived " +
                                std::to_string(arrived) + " of " + std::to_string(size) + " ranks had arrived");
    }
    // The store went away: its host gave up first (its clock started
    // earlier) or died. Either way the rendezvous did not complete in time.
    fail(Status::Timeout, "rendezvous at " + where + " failed: the store hosted by rank 0 closed " +
                              "while this rank waited (rank 0 timed out or died); when last seen " +
                              std::to_string(arrived) + " of " + std::to_string(size) + " ranks arrived (" +
                              e.what() + ")");
  }
}

std::string job_key_prefix(const std::string& job_id, int restart) {
  return "ddp/" + job_id + "/r" + std::to_string(restart);
}

void announce_joining(KeyStore& job, int rank) {
  job.set("joined/" + std::to_string(rank), Bytes{1});
  job.add("joined", 1);
}

bool has_joined(KeyStore& job, int rank) { return job.check({"joined/" + std::to_string(rank)}); }

int64_t ranks_joining(KeyStore& job) { return job.add("joined", 0); }

int64_t join_generation(const std::shared_ptr<KeyStore>& base, int size, std::chrono::milliseconds timeout,
                        const std::string& where, const GiveUp& give_up) {
  // Every init of a group on this store meets under the current generation
  // "g<N>". The rank that completes the count advances N for the next init;
  // a rank that times out advances it too (compare-and-set: once), so ranks
  // whose earlier inits failed differently still meet under the same N.
  int64_t gen = base->add("gen", 0);
  PrefixKeys at_gen("g" + std::to_string(gen), base);
  auto advance = [&] {
    std::string now = std::to_string(gen), next = std::to_string(gen + 1);
    base->compare_set("gen", Bytes(now.begin(), now.end()), Bytes(next.begin(), next.end()));
  };
  try {
    if (count_in(at_gen, size, timeout, where, give_up)) advance();
  } catch (const Error& e) {
    if (e.status() == Status::Timeout) {
      try {
        advance();
      } catch (...) {
      }
    }
    throw;
  }
  return gen;
}

}  // namespace ddp::core
