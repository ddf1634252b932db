// Collectives that the device waits for instead of the host. On CUDA, a DDP
// step's bucket all-reduces are stream-ordered as in PyTorch's reducer: the
// compute stream waits for NCCL's stream (c10d's Work::synchronize) and the
// host goes on to the optimizer step at once. Nobody blocks on them, so a
// watchdog thread does what a blocking wait would: a collective that has not
// finished by the group's timeout, one that failed, or a failure another
// rank published breaks and publishes the group (as Pending::wait does), and
// the owner's next call reports it with its original status.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "comm/collectives.h"
#include "common/error.h"

namespace ddp::core {

class StreamWatch {
 public:
  explicit StreamWatch(Group& group);
  // Waits (host-side, each within the group's timeout) for what is still in
  // flight: its buffers belong to the owner, who frees them next.
  ~StreamWatch();
  StreamWatch(const StreamWatch&) = delete;
  StreamWatch& operator=(const StreamWatch&) = delete;

  // Whether the group's collectives can be left to the device: NCCL on CUDA,
  // whose work makes a stream wait. (Gloo's CPU work orders nothing: its
  // results are ready only once the host has waited.)
  static bool device_orders(const Group& group);
  // Leaves `p` to the device (the current stream waits for its
  // communication) and watches it until it finishes. A collective with a
  // host step after its communication (a hook's decompression) is waited
  // for here instead. Throws what the watchdog saw fail earlier.
  void order(PendingPtr p);
  // Throws what the watchdog saw fail, with its status; the group is
  // broken from then on.
  void throw_if_failed();
  // Collectives still being watched (finished ones are dropped as they are seen).
  size_t in_flight();

 private:
  struct Watched {
    PendingPtr pending;
    Clock::time_point deadline;
  };
  void run();
  void record(Status s, const std::string& why);

  Group& group_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Watched> watched_;
  std::optional<Error> failure_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace ddp::core
