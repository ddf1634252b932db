// Where ranks, and ddprun's agents, meet: the TCPStore (hosted on a socket
// bound to the job's address, or connected to), the keys a job keeps there,
// and the arrival count that precedes every group. Used by Group::init and
// by ddprun; one protocol, one place.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace ddp::core {

using Millis = std::chrono::milliseconds;

// Hosts a TCPStore on addr:port. `listen_fd` is a socket a launcher bound
// already, or -1 to bind one to addr's address (port 0: any free one); the
// bound port is the store's getPort(). `num_workers` is nullopt when nobody
// knows it yet (an agent's store). Throws Status::IO naming the address.
c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& addr, int port, int listen_fd,
                                              std::optional<int> num_workers, Millis timeout);

// Connects to the store at addr:port, retrying until `timeout`. When nobody
// answers in time: Status::Timeout, naming `who` ("rank 3", "node 1") and the
// party that should be hosting it (`host`: "rank 0", "node 0").
c10::intrusive_ptr<c10d::TCPStore> connect_store(const std::string& addr, int port, Millis timeout,
                                                 const std::string& who, const std::string& host);

// The prefix of one job's keys on a store: the launcher's job id ("world"
// without one) and the restart round.
std::string job_key_prefix(const std::string& job_id, int restart);

// Every rank of `prefix` adds itself to a counter; returns once all `size`
// have (true on the rank that arrived last), or throws Status::Timeout saying
// how many of how many arrived.
bool count_in(c10d::Store& store, int size, Millis timeout, const std::string& where);

// count_in under the store's current generation, which every rank agrees on
// whatever failed before; returns that generation.
int64_t join_generation(const c10::intrusive_ptr<c10d::Store>& base, int size, Millis timeout,
                        const std::string& where);

// Before its first rendezvous a rank records that it joins ("joined/<rank>"
// and a count, under the job's prefix). A launcher reads them to tell a rank
// that ended with 0 before joining (the others would wait for it until their
// timeout) from one that finished its work.
void announce_joining(c10d::Store& job, int rank);
bool has_joined(c10d::Store& job, int rank);
int64_t ranks_joining(c10d::Store& job);

}  // namespace ddp::core