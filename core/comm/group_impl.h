// Group's private state, shared by group.cpp and rendezvous.cpp only.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <mutex>

#include "comm/group.h"

namespace ddp {

struct Group::Impl {
  c10::intrusive_ptr<c10d::Store> store;    // prefixed with `prefix`
  c10::intrusive_ptr<c10d::Store> monitor;  // same keys, own connection, short timeout
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

  std::mutex state_mutex;
  std::atomic<bool> broken{false};
  std::string broken_reason;
  Clock::time_point next_poll{};
};

// Every rank of `prefix` adds itself to a counter; returns once all `size`
// have, or throws DDP_E_TIMEOUT saying how many of how many arrived.
void count_in(c10d::Store& store, int size, Millis timeout, const std::string& where);

}  // namespace ddp
