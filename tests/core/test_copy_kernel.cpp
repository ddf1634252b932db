// The vector copy that replaces memcpy for large buffers (shm slots, bucket
// copy-back), its streaming twin, and the shm backend's element-wise combine: byte for byte what
// memcpy and a plain loop give, at every size around the vector loop's
// edges, at every misalignment, without touching a byte outside dst.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "comm/shm/reduce_kernels.h"
#include "common/copy_kernel.h"

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 8));
  return v;
}

TEST(CopyKernel, EqualsMemcpyAtEverySizeAndMisalignmentAndStaysInside) {
  const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 2047, 2048, 2049, 4099, (1u << 20) + 77};
  for (size_t n : sizes)
    for (size_t src_off = 0; src_off < 4; ++src_off)
      for (size_t dst_off = 0; dst_off < 4; ++dst_off) {
        auto src = pattern(n + 8, 7);
        std::vector<uint8_t> dst(n + 8, 0xEE), want(n + 8, 0xEE);
        std::memcpy(want.data() + dst_off, src.data() + src_off, n);
        ddp::core::copy_bytes(dst.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(dst, want) << "n=" << n << " src_off=" << src_off << " dst_off=" << dst_off;
        std::vector<uint8_t> streamed(n + 8, 0xEE);  // past the caches (shm/write_mode.h)
        ddp::core::copy_bytes_streaming(streamed.data() + dst_off, src.data() + src_off, n);
        ASSERT_EQ(streamed, want) << "streaming n=" << n << " src_off=" << src_off << " dst_off=" << dst_off;
      }
}

TEST(CombineKernel, EqualsAPlainLoopInPlaceAndIntoAThirdBuffer) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}, size_t{4099}}) {
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = 0.1f * static_cast<float>(i) - 3.0f;
      b[i] = 1.0f / static_cast<float>(i + 1);
    }
    std::vector<float> sum(n), mx(n);
    for (size_t i = 0; i < n; ++i) {
      sum[i] = a[i] + b[i];
      mx[i] = a[i] < b[i] ? b[i] : a[i];
    }
    std::vector<float> out(n, -1.0f);
    using ddp::core::shm::ReduceKind;
    ddp::core::shm::combine(c10::kFloat, ReduceKind::Sum, out.data(), a.data(), b.data(), n);
    EXPECT_EQ(0, std::memcmp(out.data(), sum.data(), n * sizeof(float))) << n;
    std::vector<float> in_place = a;
    ddp::core::shm::accumulate(c10::kFloat, ReduceKind::Max, in_place.data(), b.data(), n);
    EXPECT_EQ(0, std::memcmp(in_place.data(), mx.data(), n * sizeof(float))) << n;
    std::vector<int32_t> x(n), y(n), want(n), got(n);
    for (size_t i = 0; i < n; ++i) {
      x[i] = static_cast<int32_t>(i * 2654435761u);
      y[i] = static_cast<int32_t>(i * 40503u + 17);
      want[i] = x[i] ^ y[i];
    }
    ddp::core::shm::combine(c10::kInt, ReduceKind::BitXor, got.data(), x.data(), y.data(), n);
    EXPECT_EQ(got, want) << n;
  }
}

}  // namespace
