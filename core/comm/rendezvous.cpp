// The store and the keys where ranks and agents meet. c10d's own TCPStore
// wait reports nothing about who is missing; count_in does.
#include "comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "comm/failure.h"
#include "common/error.h"
#include "launch/supervisor.h"

namespace ddp::core {

c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& addr, int port, int listen_fd,
                                              std::optional<int> num_workers, Millis timeout) {
  c10d::TCPStoreOptions so;
  so.isServer = true;
  so.numWorkers = num_workers;
  so.waitWorkers = false;
  so.timeout = timeout;
  int bound = port;
  if (listen_fd < 0) listen_fd = launch::listen_socket(addr, port, &bound);
  so.masterListenFd = listen_fd;
  so.port = static_cast<uint16_t>(bound);
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, so);
  } catch (const std::exception& e) {
    fail(Status::IO, "cannot host the rendezvous store on " + addr + ":" + std::to_string(bound) + ": " +
                       short_what(e));
  }
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const std::string& addr, int port, Millis timeout,
                                                 const std::string& who, const std::string& host) {
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = timeout;
  std::string where = addr + ":" + std::to_string(port);
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, so);
  } catch (const std::exception& e) {
    std::string what = short_what(e);
    Status s = classify_exception(e);
    if (s == Status::Timeout || s == Status::PeerFailed)
      fail(Status::Timeout, who + " could not reach the rendezvous store at " + where + " within " +
                              std::to_string(timeout.count()) + " ms; is " + host +
                              " running, and are that address and port right? (" + what + ")");
    fail(s == Status::Backend ? Status::IO : s, "rendezvous store at " + where + ": " + what);
  }
}

bool count_in(c10d::Store& store, int size, Millis timeout, const std::string& where) {
  int64_t arrived = store.add("arrived", 1);
  if (arrived > size)
    fail(Status::State, "rendezvous at " + where + ": " + std::to_string(arrived) +
                          " ranks arrived for a world of " + std::to_string(size) +
                          " (two jobs sharing MASTER_ADDR:MASTER_PORT?)");
  if (arrived == size) {
    store.set("complete", std::vector<uint8_t>{1});
    return true;
  }
  try {
    store.wait({"complete"}, timeout);
    return false;
  } catch (const std::exception& e) {
    if (classify_exception(e) == Status::Timeout) {
      int64_t now = arrived;
      try {
        now = store.add("arrived", 0);
      } catch (...) {
      }
      fail(Status::Timeout, "rendezvous at " + where + " timed out after " +
                              std::to_string(timeout.count()) + " ms: " + std::to_string(now) +
                              " of " + std::to_string(size) + " ranks arrived");
    }
    // The store went away: rank 0 gave up first (its clock started earlier)
    // or died. Either way the rendezvous did not complete in time.
    fail(Status::Timeout, "rendezvous at " + where + " failed: the store hosted by rank 0 closed " +
                            "while this rank waited (rank 0 timed out or died); when last seen " +
                            std::to_string(arrived) + " of " + std::to_string(size) +
                            " ranks arrived (" + short_what(e) + ")");
  }
}

std::string job_key_prefix(const std::string& job_id, int restart) {
  return "ddp/" + job_id + "/r" + std::to_string(restart);
}

void announce_joining(c10d::Store& job, int rank) {
  job.set("joined/" + std::to_string(rank), std::vector<uint8_t>{1});
  job.add("joined", 1);
}

bool has_joined(c10d::Store& job, int rank) { return job.check({"joined/" + std::to_string(rank)}); }

int64_t ranks_joining(c10d::Store& job) { return job.add("joined", 0); }

int64_t join_generation(const c10::intrusive_ptr<c10d::Store>& base, int size, Millis timeout,
                        const std::string& where) {
  // Every init of a group on this store meets under the current generation
  // "g<N>". The rank that completes the count advances N for the next init;
  // a rank that times out advances it too (compare-and-set: once), so ranks
  // whose earlier inits failed differently still meet under the same N.
  int64_t gen = base->add("gen", 0);
  auto at_gen = c10::make_intrusive<c10d::PrefixStore>("g" + std::to_string(gen), base);
  auto advance = [&] {
    std::string now = std::to_string(gen), next = std::to_string(gen + 1);
    base->compareSet("gen", std::vector<uint8_t>(now.begin(), now.end()),
                     std::vector<uint8_t>(next.begin(), next.end()));
  };
  try {
    if (count_in(*at_gen, size, timeout, where)) advance();
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