// Where ranks meet: c10d's TCPStore, hosted on a socket bound to the job's
// address, or connected to through a BoundedStore, and seen as a KeyStore
// so that the meeting protocol (store/meeting.h), which ddprun's agent runs
// without LibTorch, has one home.
#pragma once

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "comm/bounded_store.h"
#include "store/meeting.h"

namespace ddp::core {

using Millis = std::chrono::milliseconds;

// Hosts a TCPStore on addr:port. `listen_fd` is a socket a launcher bound
// already, or -1 to bind one to addr's address (port 0: any free one); the
// bound port is the store's getPort(). `num_workers` is nullopt when nobody
// knows it yet (an agent's store). Throws Status::IO naming the address.
c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& addr, int port, int listen_fd,
                                              std::optional<int> num_workers, Millis timeout);

// Connects to the store at addr:port, retrying until `timeout`, which then
// bounds every call on the connection (comm/bounded_store.h: a stopped host
// ends a call with c10d's DistNetworkError, never holds it). When nobody
// answers in time: Status::Timeout, naming `who` ("rank 3", "node 1") and
// the party that should be hosting it (`host`: "rank 0", "node 0").
c10::intrusive_ptr<BoundedStore> connect_store(const std::string& addr, int port, Millis timeout,
                                               const std::string& who, const std::string& host);

// Shuts down the connection of a client of connect_store (store, or the
// client under a PrefixStore) whatever its state: a call on it in progress,
// even one waiting for a stopped host, and every later one fail at once.
// For the one user of a connection, at its end.
void shut_down_connection(c10d::Store& store);

// The same store as a KeyStore (store/key_store.h), for the meeting
// protocol of store/meeting.h; what c10d throws arrives as ddp::core::Error,
// classified (comm/failure.h).
std::shared_ptr<KeyStore> keys_of(c10::intrusive_ptr<c10d::Store> store);

}  // namespace ddp::core
