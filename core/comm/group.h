// A process group: the ranks of one job (or a subgroup of it) joined over a
// c10d backend, plus the failure state that turns a dead or stalled peer
// into a clear status on every rank instead of a hang.
//
// LibTorch types stay behind a pimpl so that this header is cheap to include.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/types.h"
#include "env/cluster_env.h"

namespace c10d {
class Backend;
class Store;
}  // namespace c10d

namespace ddp::core {

class StagingPool;

class DirectCollectives;
using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// Throws Status::InvalidArgument unless 0 < timeout <= kMaxTimeout; `what`
// names the setting in the message.
void check_timeout(Millis timeout, const std::string& what);

struct GroupOptions {
  std::string backend;         // "" = auto: "nccl" for a CUDA device, else "gloo"
  Millis timeout{1800 * 1000};  // every collective and the rendezvous
  Device device{DeviceType::CPU, 0};
  // Asked while init waits for the other ranks (store/meeting.h): the
  // strategy's popen launcher says when a rank it started has ended.
  std::function<std::optional<std::string>()> give_up;
};

class Group {
 public:
  // Lightning's init_dist_connection: TCPStore at master_addr:master_port
  // (hosted by rank 0), every rank counted in, then the backend connects.
  static std::unique_ptr<Group> init(const ClusterEnv& env, const GroupOptions& opts);

  // torch.distributed.new_subgroups: consecutive blocks of `group_size` ranks
  // (0: one block per node, i.e. local_world_size). Returns the block this
  // rank belongs to. Every rank of this group must call it, in the same order.
  std::unique_ptr<Group> new_subgroup(int group_size);

  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const;
  int size() const;
  // Whether `other` is this group or a subgroup of the same job (made by
  // new_subgroup from it or from the group it came from).
  bool same_job(const Group& other) const;
  const std::string& backend_name() const;
  Millis timeout() const;
  void set_timeout(Millis timeout);
  Device device() const;

  // The backend, after checking that the group is still usable; `op` names
  // the caller in the Status::State message.
  c10d::Backend& backend_for(const char* op);
  // The backend's blocking collectives on the caller's thread
  // (comm/direct_collectives.h), or nullptr where it has none; checked as
  // backend_for is.
  DirectCollectives* direct_for(const char* op);

  // DDP_DEBUG=DETAIL (or set_detail_checks): before each collective the
  // ranks compare what they are about to call (see collectives.cpp). Every
  // rank must use the same setting. next_check() numbers the checked calls.
  bool detail_checks() const;
  void set_detail_checks(bool on);
  int64_t next_check();

  // The flight recorder's name for this group (the same on every rank) and
  // the number of its next collective, counted from 1 (debug/flight_recorder.h).
  const char* flight_label() const;
  int64_t next_flight_seq();

  // Failure state. A timeout or a dead peer breaks the group for good: the
  // failure is published to the other ranks through the store, and every
  // later call fails with Status::State.
  bool broken() const;
  [[noreturn]] void fail_and_publish(Status status, const std::string& message);
  // Throws the failure another rank published (with its original status),
  // or Status::PeerFailed when the store is gone; never blocks on the store.
  void throw_if_peer_reported();
  // Whether throw_if_peer_reported() would throw now.
  bool peer_reported() const;
  // The ranks called different collectives and a check caught it (the
  // group stays usable): the flight recorder dumps, with `what` as reason.
  void record_call_mismatch(const std::string& what);
  // Where this group stages caller memory for its backend (comm/caller_memory.h).
  StagingPool& staging_pool();
  // Before reporting a failure of its own, a rank looks (waiting up to a
  // second) for one published earlier: that one is the root cause, and
  // every rank reports its status.
  void throw_root_cause_if_reported();

  struct Impl;

 private:
  explicit Group(std::unique_ptr<Impl> impl);
  void check_usable(const char* op);
  void settle_backend();
  [[noreturn]] void throw_reported(const std::string& payload);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::core