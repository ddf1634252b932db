// Helpers for the multi-process worker: checks that record failures, and
// element conversion for every libddp dtype (so expected values can be
// computed in double and compared exactly).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <ddp/ddp.h>

namespace worker {

extern int g_failures;
extern int g_rank;

#define WCHECK(cond, ...)                                               \
  do {                                                                  \
    if (!(cond)) {                                                      \
      ++worker::g_failures;                                             \
      std::fprintf(stderr, "[rank %d] %s:%d: CHECK(%s) failed: ", worker::g_rank, __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                \
      std::fprintf(stderr, "\n");                                       \
    }                                                                   \
  } while (0)

#define WOK(call)                                                                   \
  do {                                                                              \
    ddp_status s_ = (call);                                                         \
    WCHECK(s_ == DDP_OK, "%s -> %s: %s", #call, ddp_status_string(s_), ddp_last_error_message()); \
  } while (0)

inline uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (f == 0.0f) return static_cast<uint16_t>(sign);
  if (exp <= 0) return static_cast<uint16_t>(sign);  // tests use no subnormals
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  return static_cast<uint16_t>(sign | (exp << 10) | (mant >> 13));
}
inline float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) x = sign;
    else { float f = std::ldexp(static_cast<float>(mant), -24); return sign ? -f : f; }
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline void store(ddp_dtype d, void* base, size_t i, double v) {
  switch (d) {
    case DDP_FLOAT32: static_cast<float*>(base)[i] = static_cast<float>(v); break;
    case DDP_FLOAT64: static_cast<double*>(base)[i] = v; break;
    case DDP_FLOAT16: static_cast<uint16_t*>(base)[i] = float_to_half(static_cast<float>(v)); break;
    case DDP_BFLOAT16: {
      float f = static_cast<float>(v);
      uint32_t x;
      std::memcpy(&x, &f, 4);
      static_cast<uint16_t*>(base)[i] = static_cast<uint16_t>(x >> 16);
      break;
    }
    case DDP_INT8: static_cast<int8_t*>(base)[i] = static_cast<int8_t>(v); break;
    case DDP_UINT8: static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(v); break;
    case DDP_INT32: static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v); break;
    case DDP_INT64: static_cast<int64_t*>(base)[i] = static_cast<int64_t>(v); break;
    case DDP_BOOL: static_cast<uint8_t*>(base)[i] = v != 0; break;
  }
}

inline double load(ddp_dtype d, const void* base, size_t i) {
  switch (d) {
    case DDP_FLOAT32: return static_cast<const float*>(base)[i];
    case DDP_FLOAT64: return static_cast<const double*>(base)[i];
    case DDP_FLOAT16: return half_to_float(static_cast<const uint16_t*>(base)[i]);
    case DDP_BFLOAT16: {
      uint32_t x = static_cast<uint32_t>(static_cast<const uint16_t*>(base)[i]) << 16;
      float f;
      std::memcpy(&f, &x, 4);
      return f;
    }
    case DDP_INT8: return static_cast<const int8_t*>(base)[i];
    case DDP_UINT8: return static_cast<const uint8_t*>(base)[i];
    case DDP_INT32: return static_cast<const int32_t*>(base)[i];
    case DDP_INT64: return static_cast<double>(static_cast<const int64_t*>(base)[i]);
    case DDP_BOOL: return static_cast<const uint8_t*>(base)[i] ? 1 : 0;
  }
  return 0;
}

inline bool is_float(ddp_dtype d) {
  return d == DDP_FLOAT32 || d == DDP_FLOAT64 || d == DDP_FLOAT16 || d == DDP_BFLOAT16;
}

constexpr ddp_dtype kAllDtypes[] = {DDP_FLOAT32, DDP_FLOAT64, DDP_FLOAT16, DDP_BFLOAT16, DDP_INT8,
                                    DDP_UINT8,   DDP_INT32,   DDP_INT64,   DDP_BOOL};

// Float arrays owned by the test, each also wrapped as a 1-D ddp_tensor
// viewing it (freed with the set).
class FloatArrays {
 public:
  FloatArrays(const std::vector<size_t>& sizes, float fill) : data_(sizes.size()), handles_(sizes.size(), nullptr) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      data_[i].assign(sizes[i], fill);
      int64_t shape[1] = {static_cast<int64_t>(sizes[i])};
      ddp_tensor_from_blob(&handles_[i], data_[i].data(), DDP_FLOAT32, shape, 1);
    }
  }
  ~FloatArrays() {
    for (auto* h : handles_) ddp_tensor_free(h);
  }
  FloatArrays(const FloatArrays&) = delete;
  FloatArrays& operator=(const FloatArrays&) = delete;
  std::vector<float>& operator[](size_t i) { return data_[i]; }
  ddp_tensor* const* tensors() const { return handles_.data(); }
  ddp_tensor* tensor(size_t i) const { return handles_[i]; }

 private:
  std::vector<std::vector<float>> data_;
  std::vector<ddp_tensor*> handles_;
};

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace worker
