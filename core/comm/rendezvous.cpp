// The arrival count that precedes every group's backend connection. c10d's
// own TCPStore wait reports nothing about who is missing; this one does.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/failure.h"
#include "comm/group_impl.h"
#include "common/error.h"

namespace ddp {

void count_in(c10d::Store& store, int size, Millis timeout, const std::string& where) {
  int64_t arrived = store.add("arrived", 1);
  if (arrived > size)
    fail(DDP_E_STATE, "rendezvous at " + where + ": " + std::to_string(arrived) +
                          " ranks arrived for a world of " + std::to_string(size) +
                          " (two jobs sharing MASTER_ADDR:MASTER_PORT?)");
  if (arrived == size) {
    store.set("complete", std::vector<uint8_t>{1});
    return;
  }
  try {
    store.wait({"complete"}, timeout);
  } catch (const std::exception& e) {
    if (classify_exception(e) == DDP_E_TIMEOUT) {
      int64_t now = arrived;
      try {
        now = store.add("arrived", 0);
      } catch (...) {
      }
      fail(DDP_E_TIMEOUT, "rendezvous at " + where + " timed out after " +
                              std::to_string(timeout.count()) + " ms: " + std::to_string(now) +
                              " of " + std::to_string(size) + " ranks arrived");
    }
    // The store went away: rank 0 gave up first (its clock started earlier)
    // or died. Either way the rendezvous did not complete in time.
    fail(DDP_E_TIMEOUT, "rendezvous at " + where + " failed: the store hosted by rank 0 closed " +
                            "while this rank waited (rank 0 timed out or died); when last seen " +
                            std::to_string(arrived) + " of " + std::to_string(size) +
                            " ranks arrived (" + short_what(e) + ")");
  }
}

}  // namespace ddp
