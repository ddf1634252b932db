// Group's private state, shared by group.cpp and rendezvous.cpp only.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <mutex>

#include "comm/direct_collectives.h"
#include "comm/group.h"
#include "comm/staging_pool.h"
#include "comm/store_monitor.h"

namespace ddp::core {

// Declaration order is destruction order, reversed: the backend goes first,
// the store server (rank 0 without an agent) last.
struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> server;         // hosts MASTER_PORT; the backend never holds it
  c10::intrusive_ptr<c10d::Store> store;          // prefixed with `prefix`
  c10::intrusive_ptr<c10d::Store> monitor_store;  // same keys, a connection of its own
  c10::intrusive_ptr<c10d::Store> job_monitor_store;  // that connection at the job's keys (a launcher's abort)
  std::unique_ptr<StoreMonitor> monitor;          // the only user of monitor_store
  c10::intrusive_ptr<c10d::Backend> backend;
  DirectCollectives* direct = nullptr;  // the backend's, when it has them (shm)
  std::string prefix;
  std::string backend_name;
  std::string master_addr;
  int master_port = 0;     // the store's (a subgroup's monitor connects to it)
  std::string job_prefix;  // the job's keys (job_monitor_store's prefix)
  std::string node;  // the environment's node rank: who shares a host
  int rank = 0;
  int size = 1;
  int local_world_size = 1;
  Millis timeout{0};
  Device device{DeviceType::CPU, 0};
  int subgroups_made = 0;
  // The same for a job's group and every subgroup made from it, and
  // different for each group init in this process: what says a group
  // belongs to a job.
  uint64_t job_token = 0;
  // "g<generation>[/sub<k>/<block>]" (no job secret in dump files), interned.
  const char* flight_label = "?";
  std::atomic<int64_t> flight_seq{0};
  bool detail_checks = false;
  int64_t checks_made = 0;

  std::mutex state_mutex;
  std::atomic<bool> broken{false};
  std::string broken_reason;

  StagingPool staging;  // comm/caller_memory.h
};

}  // namespace ddp::core