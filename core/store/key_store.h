// The key-value store that ranks and launcher agents meet in, as an
// interface that needs no LibTorch: ddprun's agent speaks to it over the
// wire (wire_client.h), a rank through c10d's TCPStore (comm/rendezvous.h
// adapts one to this). Every call throws ddp::core::Error: Status::Timeout
// when its time ran out, Status::PeerFailed when the store went away,
// Status::IO for anything else the store did wrong.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp::core {

using Bytes = std::vector<uint8_t>;

class KeyStore {
 public:
  virtual ~KeyStore() = default;
  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Waits for the key (as c10d's get does), up to the store's timeout.
  virtual Bytes get(const std::string& key) = 0;
  // Adds to a decimal counter (created at 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Whether every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Sets `desired` when the value is `expected` (or the key is missing and
  // `expected` is empty); returns the value the key holds afterwards.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
};

// A view of a store under a prefix: "prefix/key", as c10d's PrefixStore
// names them, so both kinds of client see the same keys.
class PrefixKeys : public KeyStore {
 public:
  PrefixKeys(std::string prefix, std::shared_ptr<KeyStore> base)
      : prefix_(std::move(prefix) + "/"), base_(std::move(base)) {}

  void set(const std::string& key, const Bytes& value) override { base_->set(prefix_ + key, value); }
  Bytes get(const std::string& key) override { return base_->get(prefix_ + key); }
  int64_t add(const std::string& key, int64_t delta) override { return base_->add(prefix_ + key, delta); }
  bool check(const std::vector<std::string>& keys) override { return base_->check(prefixed(keys)); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    base_->wait(prefixed(keys), timeout);
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return base_->compare_set(prefix_ + key, expected, desired);
  }

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const {
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(prefix_ + k);
    return out;
  }

  std::string prefix_;
  std::shared_ptr<KeyStore> base_;
};

}  // namespace ddp::core
