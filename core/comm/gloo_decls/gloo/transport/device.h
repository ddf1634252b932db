#pragma once
// See ../../README.md: declarations only, for c10d's ProcessGroupGloo.hpp.
namespace gloo {
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo
