#pragma once
// See ../README.md: declarations only, for c10d's ProcessGroupGloo.hpp.
// ProcessGroupGloo::setTimeout (inline) names Context::setTimeout; libddp
// reaches that function only through the Backend vtable, which lives in
// libtorch_cpu, so the declaration here is never called or emitted.
#include <chrono>

namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
}  // namespace gloo
