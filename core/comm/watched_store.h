// A PrefixStore whose waits end early when another rank of the group has
// reported a failure (the group's monitor): a backend that meets its peers
// through the store (Gloo's connect, NCCL's unique id, the ready check after
// a backend starts) would otherwise wait out its whole timeout for a rank
// that already failed, and then report a timeout instead of that rank's
// reason.
#pragma once

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ddp::core {

class WatchedPrefixStore : public c10d::PrefixStore {
 public:
  // What another rank published ("status|rank R: message"), if anything.
  using Report = std::function<std::optional<std::string>()>;
  WatchedPrefixStore(std::string prefix, c10::intrusive_ptr<c10d::Store> store, Report report);

  std::vector<uint8_t> get(const std::string& key) override;
  std::vector<std::vector<uint8_t>> multiGet(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys) override;
  // Waits in slices and looks at the report between them; throws
  // ddp::core::Error with the reporting rank's status and message.
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  // call(), with a read that timed out on the socket (a stopped host: see
  // connect_store) turned into Status::Timeout naming `keys`.
  template <typename Call>
  auto answered(const std::vector<std::string>& keys, const Call& call) -> decltype(call());
  Report report_;
};

}  // namespace ddp::core
