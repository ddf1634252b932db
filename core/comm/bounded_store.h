// A c10d::Store on libddp's own client of the TCPStore protocol
// (store/wire_client.h), which bounds every call by the store's timeout:
// c10d's TCPStore client reads an answer with no bound, so a stopped or
// stalled host (SIGSTOP, a debugger; its kernel still completes connections)
// would hold a rank, and Gloo and NCCL behind it, forever. What the group,
// its store watcher and the backends use to reach the job's store.
//
// Errors come as c10d throws them, for the c10d code behind it (PrefixStore,
// Gloo, NCCL) and for comm/failure.h: a wait whose keys did not come in time
// is c10d's DistStoreError ("wait timeout", the connection still usable);
// a host that did not answer within the timeout, or went away, is its
// DistNetworkError (read_timed_out() tells the first). After either of
// those the connection is closed: every later call fails at once, rather
// than read a late answer as its own.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace ddp::core {

class WireStoreClient;

class BoundedStore : public c10d::Store {
 public:
  // Connects to addr:port, retrying while nobody listens there, and
  // handshakes, all within `timeout`, which then bounds every call.
  // Throws ddp::core::Error (Status::Timeout naming addr:port and what did
  // not come: a listener, or the host's answer).
  BoundedStore(const std::string& addr, int port, std::chrono::milliseconds timeout);
  ~BoundedStore() override;

  // A connection of its own to the same store.
  c10::intrusive_ptr<c10d::Store> clone() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
  // Also the bound of every later call (c10d's kNoTimeout: none that ends).
  void setTimeout(const std::chrono::milliseconds& timeout) override;

  // Ends the connection whatever its state (WireStoreClient::shut_down): a
  // call in progress, even against a stopped host, fails now.
  void shut_down();

 private:
  template <typename Call>
  auto translated(const char* what, const Call& call) -> decltype(call());

  std::string addr_;
  int port_;
  std::unique_ptr<WireStoreClient> client_;
};

}  // namespace ddp::core
