// A client of a c10d TCPStore (or of WireStoreServer) that needs no
// LibTorch: ddprun's agents meet, beat and publish failures through it.
// Calls are serialised; each has the client's timeout as its bound, and a
// call that timed out mid-answer leaves the connection unusable (later calls
// fail at once with the same status) rather than out of step.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "common/types.h"
#include "store/key_store.h"

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

 private:
  using Clock = std::chrono::steady_clock;
  void connect_until(Clock::time_point deadline);
  void send_all(const std::vector<uint8_t>& bytes, Clock::time_point deadline, const char* what);
  // False when the deadline passed first (nothing is consumed then only if
  // nothing had arrived; a partial answer breaks the connection).
  bool recv_all(void* out, size_t n, Clock::time_point deadline, const char* what);
  void recv_or_fail(void* out, size_t n, Clock::time_point deadline, const char* what);
  Bytes recv_blob(Clock::time_point deadline, const char* what);
  void wait_locked(const std::vector<std::string>& keys, Millis timeout);
  [[noreturn]] void broken(Status s, const std::string& why);
  void check_usable() const;

  std::string where_;
  Millis timeout_;
  int fd_ = -1;
  std::mutex mu_;
  bool broken_ = false;
  Status broken_status_ = Status::PeerFailed;
  std::string broken_why_;
};

}  // namespace ddp::core
