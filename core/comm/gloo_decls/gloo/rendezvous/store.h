#pragma once
// See ../../README.md: declarations only, for c10d's ProcessGroupGloo.hpp.
// ProcessGroupGloo::GlooStore derives from this class inline; libddp never
// instantiates GlooStore, so only the overridden signatures have to exist.
#include <chrono>
#include <string>
#include <vector>

namespace gloo {
namespace rendezvous {
class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::vector<char>& data) = 0;
  virtual std::vector<char> get(const std::string& key) = 0;
  virtual void wait(const std::vector<std::string>& keys) = 0;
  virtual void wait(const std::vector<std::string>& keys,
                    const std::chrono::milliseconds& timeout) = 0;
};
}  // namespace rendezvous
}  // namespace gloo
