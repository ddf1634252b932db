// Version, status strings and tensors through the C API (one process).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ddp/ddp.h>

#include "capi_test_util.h"

namespace {

TEST(CApi, VersionStatusAndTensors) {
  EXPECT_EQ(ddp_version_number(), static_cast<unsigned>(DDP_VERSION_NUMBER));
  EXPECT_STREQ(ddp_status_string(DDP_E_TIMEOUT), "timeout");
  EXPECT_STREQ(ddp_status_string(-1000), "unknown status");
  const ddp_dtype all[] = {DDP_FLOAT32, DDP_FLOAT64, DDP_FLOAT16, DDP_BFLOAT16, DDP_INT8,
                           DDP_UINT8,   DDP_INT32,   DDP_INT64,   DDP_BOOL};
  const size_t sizes[] = {4, 8, 2, 2, 1, 1, 4, 8, 1};
  for (size_t i = 0; i < 9; ++i) {
    int64_t shape[2] = {3, 5};
    ddp_tensor* t = nullptr;
    ddp_device cpu = DDP_DEVICE_CPU_INIT;
    ASSERT_EQ(ddp_tensor_new(&t, all[i], shape, 2, cpu), DDP_OK);
    EXPECT_EQ(ddp_tensor_dtype(t), all[i]);
    EXPECT_EQ(ddp_dtype_size(all[i]), sizes[i]);
    EXPECT_EQ(ddp_tensor_numel(t), 15);
    EXPECT_EQ(ddp_tensor_nbytes(t), 15 * sizes[i]);
    std::vector<unsigned char> host(15 * sizes[i], 0xff);
    ASSERT_EQ(ddp_tensor_copy_to(t, host.data(), host.size()), DDP_OK);
    for (auto b : host) EXPECT_EQ(b, 0);  // zero-filled
    EXPECT_EQ(ddp_tensor_copy_to(t, host.data(), host.size() - 1), DDP_E_INVALID_ARGUMENT);
    ddp_tensor_free(t);
  }
  // from_blob is zero-copy.
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t s[2] = {2, 3};
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, x, DDP_FLOAT32, s, 2), DDP_OK);
  EXPECT_EQ(ddp_tensor_data(t), static_cast<void*>(x));
  EXPECT_EQ(ddp_tensor_shape(t)[1], 3);
  ddp_tensor_free(t);
  // CUDA without a GPU: a clear UNSUPPORTED, not a crash; with one, a tensor.
  ddp_device cuda = {DDP_DEVICE_CUDA, 0};
  if (have_cuda_device()) {
    ASSERT_EQ(ddp_tensor_new(&t, DDP_FLOAT32, s, 2, cuda), DDP_OK) << ddp_last_error_message();
    EXPECT_EQ(ddp_tensor_device(t).type, DDP_DEVICE_CUDA);
    ddp_tensor_free(t);
    t = nullptr;
  } else {
    EXPECT_EQ(ddp_tensor_new(&t, DDP_FLOAT32, s, 2, cuda), DDP_E_UNSUPPORTED) << ddp_last_error_message();
    EXPECT_EQ(t, nullptr);
  }
  ddp_error_clear();
  EXPECT_STREQ(ddp_last_error_message(), "");
  ddp_group_options o;
  EXPECT_EQ(ddp_group_options_init(&o, 99), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_group_options_init(&o, DDP_GROUP_OPTIONS_VERSION), DDP_OK);
  EXPECT_EQ(o.timeout_ms, 0);
}

}  // namespace
