// Creating c10d backends. Each backend lives in its own translation unit:
// the NCCL one is compiled only when CUDA and NCCL headers are present.
#pragma once

#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <optional>
#include <string>

#include "comm/group.h"
#include "common/error.h"

namespace ddp::core {

struct BackendSpec {
  c10::intrusive_ptr<c10d::Store> store;  // already prefixed for this group
  int rank = 0;
  int size = 1;
  Millis timeout{0};
  std::string master_addr;  // used to pick the network interface
  Device device{DeviceType::CPU, 0};
  std::string node;  // ranks with the same node id share a host (the shm backend)
  // What another rank or the launcher reported to the group (the group's
  // monitor), for a backend that waits by itself: the shm backend's leaders
  // check it while they wait for the other nodes. Empty: nothing to check.
  std::function<std::optional<std::string>()> peer_report;
  // Tells the other ranks why this rank's backend failed (the group's
  // monitor), so that their waits for it end with this reason; for a
  // backend that connects more later (the shm backend's Gloo). Empty:
  // nobody to tell.
  std::function<void(Status, const std::string&)> publish_failure;
};

// The error a rank stops with when its backend (`what`: "<name> backend",
// or a part of one) could not connect it: another rank's report when there
// is one (the root cause, which also ended this rank's waits), else its own
// error, which it publishes to the others (spec.publish_failure).
Error backend_connect_failure(const BackendSpec& spec, const std::exception& e, const std::string& what);

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const BackendSpec& spec);
// Status::Unsupported when built without NCCL or run without a CUDA device.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendSpec& spec);
bool nccl_compiled_in();
// Shared memory between the ranks of each node, Gloo between nodes and for
// what it does not do itself (comm/shm/shm_backend.cpp). Where some rank
// cannot map the segment, every rank gets a Gloo backend instead.
c10::intrusive_ptr<c10d::Backend> make_shm_backend(const BackendSpec& spec);

}  // namespace ddp::core