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

// ---- DLPack exchange ---------------------------------------------------------
// dlpack.h's layout (stable since DLPack 0.2), declared here so that the test
// makes a producer of its own, as NumPy or JAX would be.
namespace dl {
struct Tensor {
  void* data;
  struct { int32_t device_type, device_id; } device;
  int32_t ndim;
  struct { uint8_t code, bits; uint16_t lanes; } dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
};
struct Managed {
  Tensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(Managed* self);
};
int deletes = 0;
void count_delete(Managed*) { ++deletes; }
}  // namespace dl

TEST(DLPack, AForeignTensorIsSharedAndItsDeleterRunsOnceWhenTheLastHandleGoes) {
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  dl::Managed m{{data, {1, 0}, 2, {2, 32, 1}, shape, nullptr, 0}, nullptr, dl::count_delete};  // CPU float32
  dl::deletes = 0;
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_dlpack(&t, &m), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(ddp_tensor_data(t), static_cast<void*>(data));
  EXPECT_EQ(ddp_tensor_dtype(t), DDP_FLOAT32);
  ASSERT_EQ(ddp_tensor_ndim(t), 2u);
  EXPECT_EQ(ddp_tensor_shape(t)[1], 3);
  const float seven[6] = {7, 7, 7, 7, 7, 7};
  ASSERT_EQ(ddp_tensor_copy_from(t, seven, sizeof seven), DDP_OK);
  EXPECT_EQ(data[5], 7.0f);  // written into the producer's memory
  // Exported again, the memory outlives the handle until the consumer deletes it.
  void* out = nullptr;
  ASSERT_EQ(ddp_tensor_to_dlpack(t, &out), DDP_OK);
  auto* back = static_cast<dl::Managed*>(out);
  EXPECT_EQ(back->dl_tensor.data, static_cast<void*>(data));
  EXPECT_EQ(back->dl_tensor.ndim, 2);
  ddp_tensor_free(t);
  EXPECT_EQ(dl::deletes, 0);
  back->deleter(back);
  EXPECT_EQ(dl::deletes, 1);
}

TEST(DLPack, RefusedTensorsAreDeletedAndNamed) {
  float data[4] = {0, 0, 0, 0};
  int64_t shape[1] = {2}, strides[1] = {2};
  dl::deletes = 0;
  ddp_tensor* t = nullptr;
  dl::Managed complex{{data, {1, 0}, 1, {5, 64, 1}, shape, nullptr, 0}, nullptr, dl::count_delete};  // kDLComplex
  EXPECT_EQ(ddp_tensor_from_dlpack(&t, &complex), DDP_E_UNSUPPORTED);
  EXPECT_NE(std::string(ddp_last_error_message()).find("Complex"), std::string::npos) << ddp_last_error_message();
  EXPECT_EQ(t, nullptr);
  EXPECT_EQ(dl::deletes, 1);
  dl::Managed strided{{data, {1, 0}, 1, {2, 32, 1}, shape, strides, 0}, nullptr, dl::count_delete};
  EXPECT_EQ(ddp_tensor_from_dlpack(&t, &strided), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddp_last_error_message()).find("not contiguous"), std::string::npos) << ddp_last_error_message();
  EXPECT_EQ(dl::deletes, 2);
  dl::Managed no_out{{data, {1, 0}, 1, {2, 32, 1}, shape, nullptr, 0}, nullptr, dl::count_delete};
  EXPECT_EQ(ddp_tensor_from_dlpack(nullptr, &no_out), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(dl::deletes, 3);  // ownership passed on this return too
  EXPECT_EQ(ddp_tensor_from_dlpack(&t, nullptr), DDP_E_INVALID_ARGUMENT);
  void* out = nullptr;
  EXPECT_EQ(ddp_tensor_to_dlpack(nullptr, &out), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
}
