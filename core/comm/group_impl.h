// Group's private state, shared by group.cpp and rendezvous.cpp only.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <mutex>

#include "comm/group.h"
#include "comm/store_monitor.h"

namespace ddp {

// Declaration order is destruction order, reversed: the backend goes first,
// the store server (rank 0 without an agent) last.
struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> server;         // hosts MASTER_PORT; the backend never holds it
  c10::intrusive_ptr<c10d::Store> store;          // prefixed with `prefix`
  c10::intrusive_ptr<c10d::Store> monitor_store;  // same keys, a connection of its own
  std::unique_ptr<StoreMonitor> monitor;          // the only user of monitor_store
  c10::intrusive_ptr<c10d::Backend> backend;
  std::string prefix;
  std::string backend_name;
  std::string master_addr;
  int rank = 0;
  int size = 1;
  int local_world_size = 1;
  Millis timeout{0};
  ddp_device device{DDP_DEVICE_CPU, 0};
  int subgroups_made = 0;
  bool detail_checks = false;
  int64_t checks_made = 0;

  std::mutex state_mutex;
  std::atomic<bool> broken{false};
  std::string broken_reason;
};

// Every rank of `prefix` adds itself to a counter; returns once all `size`
// have (true on the rank that arrived last), or throws DDP_E_TIMEOUT saying
// how many of how many arrived.
bool count_in(c10d::Store& store, int size, Millis timeout, const std::string& where);

// count_in under the store's current generation, which every rank agrees on
// whatever failed before; returns that generation.
int64_t join_generation(const c10::intrusive_ptr<c10d::Store>& base, int size, Millis timeout,
                        const std::string& where);

// The prefix of one job's keys on a store: the launcher's job id ("world"
// without one) and the restart round.
std::string job_key_prefix(const std::string& job_id, int restart);

// Before its first rendezvous a rank records that it joins ("joined/<rank>"
// and a count, under the job's prefix). A launcher reads them to tell a rank
// that ended with 0 before joining (the others would wait for it until their
// timeout) from one that finished its work.
void announce_joining(c10d::Store& job, int rank);
bool has_joined(c10d::Store& job, int rank);
int64_t ranks_joining(c10d::Store& job);

}  // namespace ddp
