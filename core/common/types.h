// The core's own vocabulary: statuses, element types and devices. The C API
// maps its public ddp_status, ddp_dtype and ddp_device onto these (see
// capi/src/vocabulary.h), so that core includes no public header and the
// dependency runs from capi to core only. The numeric values are the C
// API's (checked there by static_assert), which makes the mapping a cast.
#pragma once

#include <chrono>
#include <cstdint>

namespace ddp::core {

// The longest timeout libddp accepts (2^31 - 1 ms, about 24.8 days): the
// largest wait that poll(2) and the backends' condition waits hold without
// overflowing (c10d and Gloo add the timeout to a nanosecond clock; 1e13 ms
// wraps it). A group's timeout, spawn's SIGTERM grace and ddprun's
// durations are bounded by it.
constexpr std::chrono::milliseconds kMaxTimeout{2147483647};

// The most steps a count that each training step adds one to may hold when
// it is read from a saved state (a scheduler's last_epoch, a comm hook's
// iteration, the model averager's step): Python's ints never overflow, an
// int64 does, and a damaged or hostile file could hold one that the next
// step overflows. No run steps 2^62 times.
constexpr int64_t kMostSteps = int64_t{1} << 62;

enum class Status : int32_t {
  Ok = 0,
  InvalidArgument = -1,
  State = -2,
  Timeout = -3,
  PeerFailed = -4,
  Backend = -5,
  NoMemory = -6,
  Unsupported = -7,
  IO = -8,
  Internal = -9,
  WorkerFailed = -10,
};

// Whether a value, as read from outside (the store, a caller's hook), is
// one of the error statuses above.
constexpr bool is_error_status(int64_t v) {
  return v >= static_cast<int64_t>(Status::WorkerFailed) && v <= static_cast<int64_t>(Status::InvalidArgument);
}

enum class DType : int32_t {
  Float32 = 0,
  Float64 = 1,
  Float16 = 2,
  BFloat16 = 3,
  Int8 = 4,
  UInt8 = 5,
  Int32 = 6,
  Int64 = 7,
  Bool = 8,
};

enum class DeviceType : int32_t { CPU = 0, CUDA = 1 };

enum class ReduceOp : int32_t { Sum = 0, Mean = 1, Min = 2, Max = 3, Product = 4 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;  // CUDA device index; ignored for CPU
};

}  // namespace ddp::core
