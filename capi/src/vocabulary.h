// The C API's public types onto the core's own (core/common/types.h). The
// values are the same by construction, checked here, so each mapping is a
// cast; core checks a dtype's or device's value where it uses one.
#pragma once

#include <string>

#include "common/error.h"
#include "common/types.h"
#include "ddp/collectives.h"
#include "ddp/common.h"

namespace ddp::capi {

static_assert(static_cast<int>(core::Status::Ok) == DDP_OK, "status values");
static_assert(static_cast<int>(core::Status::InvalidArgument) == DDP_E_INVALID_ARGUMENT, "status values");
static_assert(static_cast<int>(core::Status::State) == DDP_E_STATE, "status values");
static_assert(static_cast<int>(core::Status::Timeout) == DDP_E_TIMEOUT, "status values");
static_assert(static_cast<int>(core::Status::PeerFailed) == DDP_E_PEER_FAILED, "status values");
static_assert(static_cast<int>(core::Status::Backend) == DDP_E_BACKEND, "status values");
static_assert(static_cast<int>(core::Status::NoMemory) == DDP_E_NOMEM, "status values");
static_assert(static_cast<int>(core::Status::Unsupported) == DDP_E_UNSUPPORTED, "status values");
static_assert(static_cast<int>(core::Status::IO) == DDP_E_IO, "status values");
static_assert(static_cast<int>(core::Status::Internal) == DDP_E_INTERNAL, "status values");
static_assert(static_cast<int>(core::Status::WorkerFailed) == DDP_E_WORKER_FAILED, "status values");
static_assert(static_cast<int>(core::DType::Float32) == DDP_FLOAT32 && static_cast<int>(core::DType::Float64) == DDP_FLOAT64 &&
                  static_cast<int>(core::DType::Float16) == DDP_FLOAT16 &&
                  static_cast<int>(core::DType::BFloat16) == DDP_BFLOAT16 && static_cast<int>(core::DType::Int8) == DDP_INT8 &&
                  static_cast<int>(core::DType::UInt8) == DDP_UINT8 && static_cast<int>(core::DType::Int32) == DDP_INT32 &&
                  static_cast<int>(core::DType::Int64) == DDP_INT64 && static_cast<int>(core::DType::Bool) == DDP_BOOL,
              "dtype values");
static_assert(static_cast<int>(core::DeviceType::CPU) == DDP_DEVICE_CPU &&
                  static_cast<int>(core::DeviceType::CUDA) == DDP_DEVICE_CUDA,
              "device values");

// The C layer's own checks raise the public statuses directly.
[[noreturn]] inline void fail(ddp_status s, const std::string& message) {
  core::fail(static_cast<core::Status>(s), message);
}

inline ddp_status to_c(core::Status s) { return static_cast<ddp_status>(s); }
inline core::DType to_core(ddp_dtype d) { return static_cast<core::DType>(d); }
inline ddp_dtype to_c(core::DType d) { return static_cast<ddp_dtype>(d); }
inline core::Device to_core(ddp_device d) { return {static_cast<core::DeviceType>(d.type), d.index}; }
inline ddp_device to_c(core::Device d) { return {static_cast<ddp_device_type>(d.type), d.index}; }

inline core::ReduceOp to_core(ddp_reduce_op op) {
  switch (op) {
    case DDP_SUM: return core::ReduceOp::Sum;
    case DDP_MEAN: return core::ReduceOp::Mean;
    case DDP_MIN: return core::ReduceOp::Min;
    case DDP_MAX: return core::ReduceOp::Max;
    case DDP_PRODUCT: return core::ReduceOp::Product;
    default: break;
  }
  fail(DDP_E_INVALID_ARGUMENT, "unknown reduce op " + std::to_string(static_cast<int>(op)));
}

}  // namespace ddp::capi
