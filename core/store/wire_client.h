// A client of a c10d TCPStore (or of WireStoreServer) that needs no
// LibTorch: ddprun's agents meet, beat and publish failures through it.
// Calls are serialised; each has the client's timeout as its bound, and a
// call that timed out mid-answer leaves the connection unusable (later calls
// fail at once with the same status) rather than out of step.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>

#include "common/types.h"
#include "store/key_store.h"
#include "store/wire_protocol.h"

namespace ddp::core {

class WireStoreClient : public KeyStore {
 public:
  using Millis = std::chrono::milliseconds;

  // Connects to addr:port, retrying while nobody listens there, until
  // `timeout` (Status::Timeout naming the address and the last error).
  WireStoreClient(const std::string& addr, int port, Millis timeout);
  ~WireStoreClient() override;
  WireStoreClient(const WireStoreClient&) = delete;
  WireStoreClient& operator=(const WireStoreClient&) = delete;

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  bool check(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  // Whether `key` was there (and is now gone); the number of keys stored.
  bool delete_key(const std::string& key);
  int64_t num_keys();

  // Each later call's bound; a call in progress keeps the one it began with.
  void set_timeout(Millis timeout);
  Millis timeout() const { return Millis(timeout_ms_.load(std::memory_order_relaxed)); }
  // False once a call left the connection broken (every later call fails at
  // once): a wait that ran out of time alone leaves it usable.
  bool usable();
  // Ends the connection whatever its state, from any thread: a call in
  // progress, even one waiting for a stopped server, fails now
  // (Status::PeerFailed), and so does every later one. For the one user of
  // a connection, at its end.
  void shut_down();

 private:
  using Clock = std::chrono::steady_clock;
  void connect_until(Clock::time_point deadline);
  void send_all(const std::vector<uint8_t>& bytes, Clock::time_point deadline, const char* what);
  // False when the deadline passed first (nothing is consumed then only if
  // nothing had arrived; a partial answer breaks the connection).
  bool recv_all(void* out, size_t n, Clock::time_point deadline, const char* what);
  void recv_or_fail(void* out, size_t n, Clock::time_point deadline, const char* what);
  Bytes recv_blob(Clock::time_point deadline, const char* what);
  // Sends `query` and reads its answer, one int64 (add, delete, key count).
  int64_t ask_number(wire::Encoder& query, const char* what);
  void wait_locked(const std::vector<std::string>& keys, Millis patience);
  [[noreturn]] void broken(Status s, const std::string& why);
  void check_usable() const;

  std::string where_;
  std::atomic<Millis::rep> timeout_ms_;
  int fd_ = -1;  // open from the constructor to the destructor
  std::atomic<bool> shut_down_{false};
  std::mutex mu_;
  bool broken_ = false;
  Status broken_status_ = Status::PeerFailed;
  std::string broken_why_;
};

}  // namespace ddp::core
