// Groups of one rank: Gloo here, NCCL where a GPU is lent.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <ddp/ddp.h>

#include "capi_test_util.h"

namespace {

TEST(Nccl, NeedsACudaDevice) {
  ddp_group* g = nullptr;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  EXPECT_EQ(single_rank_group("nccl", cpu, &g), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ddp_last_error_message()).find("CUDA"), std::string::npos) << ddp_last_error_message();
  EXPECT_EQ(single_rank_group("mpi", cpu, &g), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);
  if (!have_cuda_device()) {
    ddp_device cuda = {DDP_DEVICE_CUDA, 0};
    EXPECT_EQ(single_rank_group(nullptr, cuda, &g), DDP_E_UNSUPPORTED) << ddp_last_error_message();
    EXPECT_EQ(g, nullptr);
  }
}

TEST(Nccl, AllReduceOnTheGpu) {
  if (!have_cuda_device()) GTEST_SKIP() << "no CUDA device on this machine: the NCCL path runs only where a GPU is lent";
  ddp_group* g = nullptr;
  ddp_device cuda = {DDP_DEVICE_CUDA, 0};
  ASSERT_EQ(single_rank_group(nullptr, cuda, &g), DDP_OK) << ddp_last_error_message();
  EXPECT_STREQ(ddp_group_backend(g), "nccl");
  int64_t s[1] = {4};
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_new(&t, DDP_FLOAT32, s, 1, cuda), DDP_OK);
  // Values that no no-op, zero-fill or wrong divisor would leave in place.
  const float in[4] = {1.5f, -2.0f, 3.25f, 40.0f};
  ASSERT_EQ(ddp_tensor_copy_from(t, in, sizeof(in)), DDP_OK);
  for (ddp_reduce_op op : {DDP_MEAN, DDP_SUM, DDP_MAX}) {
    EXPECT_EQ(ddp_all_reduce(g, t, op), DDP_OK) << ddp_last_error_message();
    float host[4] = {0, 0, 0, 0};
    EXPECT_EQ(ddp_tensor_copy_to(t, host, sizeof(host)), DDP_OK);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(host[i], in[i]) << "op " << op << " element " << i;
  }
  int dec = 0;
  EXPECT_EQ(ddp_reduce_boolean_decision(g, 1, 1, &dec), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(dec, 1);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

TEST(Gloo, SingleRankGroupWithAnyFreePort) {
  ddp_group* g = nullptr;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  ASSERT_EQ(single_rank_group(nullptr, cpu, &g), DDP_OK) << ddp_last_error_message();
  EXPECT_STREQ(ddp_group_backend(g), "shm");  // the CPU default: shared memory on one host
  EXPECT_EQ(ddp_group_timeout_ms(g), 20000);
  // One rank: MEAN divides by a world of 1 (a wrong divisor shows), in place
  // on the caller's memory (a copy would leave x untouched but not 7 -> 3).
  int32_t x[2] = {7, -9};
  int64_t s[1] = {2};
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, x, DDP_INT32, s, 1), DDP_OK);
  EXPECT_EQ(ddp_all_reduce(g, t, DDP_MEAN), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(x[0], 7);
  EXPECT_EQ(x[1], -9);
  ddp_tensor* gathered = nullptr;
  ASSERT_EQ(ddp_all_gather(g, t, &gathered), DDP_OK) << ddp_last_error_message();
  ASSERT_EQ(ddp_tensor_ndim(gathered), 2u);
  EXPECT_EQ(ddp_tensor_shape(gathered)[0], 1);
  int32_t back[2] = {0, 0};
  ASSERT_EQ(ddp_tensor_copy_to(gathered, back, sizeof(back)), DDP_OK);
  EXPECT_EQ(back[0], 7);
  EXPECT_EQ(back[1], -9);
  ddp_tensor_free(gathered);
  ddp_tensor_free(t);
  ddp_group_free(g);
  ddp_group_free(g);  // double free of a freed handle is ignored
}

// all_gather_into_tensor writes the caller's tensor, and each wrong output
// is refused by name before anything is written.
TEST(Gloo, AllGatherIntoTensorWritesTheCallersTensorAndNamesABadOne) {
  ddp_group* g = nullptr;
  ddp_device cpu = DDP_DEVICE_CPU_INIT;
  ASSERT_EQ(single_rank_group(nullptr, cpu, &g), DDP_OK) << ddp_last_error_message();
  int32_t buf[4] = {7, -9, 5, 0};
  int64_t two[1] = {2}, three[1] = {3};
  ddp_tensor *in = nullptr, *out = nullptr, *own = nullptr, *shifted = nullptr, *big = nullptr, *floats = nullptr;
  int32_t dst[3] = {0, 0, 0}, many[4] = {1, 1, 1, 1};  // dst[2]: room for the shifted view below
  float fdst[2] = {0, 0};
  ASSERT_EQ(ddp_tensor_from_blob(&in, buf, DDP_INT32, two, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&out, dst, DDP_INT32, two, 1), DDP_OK);
  ASSERT_EQ(ddp_all_gather_into_tensor(g, in, out), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(dst[0], 7);
  EXPECT_EQ(dst[1], -9);
  // In place: the input is the output (this rank's part of a world of one).
  ASSERT_EQ(ddp_tensor_from_blob(&own, dst, DDP_INT32, two, 1), DDP_OK);
  EXPECT_EQ(ddp_all_gather_into_tensor(g, own, out), DDP_OK) << ddp_last_error_message();
  EXPECT_EQ(dst[1], -9);
  auto refused = [&](ddp_tensor* i, ddp_tensor* o, const char* says) {
    dst[0] = 42;
    EXPECT_EQ(ddp_all_gather_into_tensor(g, i, o), DDP_E_INVALID_ARGUMENT) << says;
    EXPECT_NE(std::string(ddp_last_error_message()).find(says), std::string::npos) << ddp_last_error_message();
    EXPECT_EQ(dst[0], 42) << "written though refused: " << says;
  };
  refused(in, nullptr, "out");
  ASSERT_EQ(ddp_tensor_from_blob(&big, many, DDP_INT32, three, 1), DDP_OK);
  refused(in, big, "out has 3 elements, not world size x in's = 1 x 2");
  ASSERT_EQ(ddp_tensor_from_blob(&floats, fdst, DDP_FLOAT32, two, 1), DDP_OK);
  refused(in, floats, "out is Float, in is Int");
  // The input one element into the output: it would be overwritten while read.
  ASSERT_EQ(ddp_tensor_from_blob(&shifted, dst + 1, DDP_INT32, two, 1), DDP_OK);
  refused(shifted, out, "in overlaps out other than as rank 0's own part of it");
  for (ddp_tensor* t : {in, out, own, shifted, big, floats}) ddp_tensor_free(t);
  ddp_group_free(g);
}

}  // namespace
