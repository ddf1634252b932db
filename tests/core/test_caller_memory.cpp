// What tells caller memory apart (tensor_from_blob) and the pool a group
// stages it in (comm/staging_pool.h): a buffer goes out again only once
// nothing else holds it, so a backend still at work on one after a failed
// wait never shares it with the next call.
#include <gtest/gtest.h>

#include <ATen/ops/ones.h>

#include <vector>

#include "comm/staging_pool.h"
#include "tensor/tensors.h"

using namespace ddp::core;

TEST(CallerMemory, ViewsOfCallerMemoryAreToldApartFromOwnedTensors) {
  std::vector<float> mine(12, 1.0f);
  const int64_t shape[2] = {3, 4};
  at::Tensor view = tensor_from_blob(mine.data(), DType::Float32, shape, 2);
  EXPECT_TRUE(is_caller_memory(view));
  EXPECT_TRUE(is_caller_memory(view.select(0, 1))) << "a view of a view is the caller's memory too";
  const int64_t empty[1] = {0};
  EXPECT_TRUE(is_caller_memory(tensor_from_blob(nullptr, DType::Float32, empty, 1)));
  EXPECT_FALSE(is_caller_memory(view.clone()));
  EXPECT_FALSE(is_caller_memory(at::ones({3})));
  EXPECT_FALSE(is_caller_memory(at::Tensor()));
  view.add_(1);
  EXPECT_EQ(mine[5], 2.0f) << "still a view, not a copy";
}

TEST(StagingPool, ABufferIsReusedOnlyOnceNothingElseHoldsIt) {
  StagingPool pool;
  at::Tensor a = pool.bytes(1 << 20);
  const void* first = a.data_ptr();
  at::Tensor b = pool.bytes(1 << 20);
  EXPECT_NE(b.data_ptr(), first) << "handed out while the first user still held it";
  a.reset();
  at::Tensor c = pool.bytes(1000);  // smaller: the idle 1 MiB buffer serves it
  EXPECT_EQ(c.data_ptr(), first);
  EXPECT_EQ(c.numel(), 1000);
  // A view of the buffer (what a backend's work holds) keeps it too.
  at::Tensor held = c.view(at::kFloat).narrow(0, 0, 10);
  c.reset();
  EXPECT_NE(pool.bytes(1 << 20).data_ptr(), first);
  held.reset();
  EXPECT_EQ(pool.bytes(1 << 20).data_ptr(), first) << "idle again once the view went";
}

TEST(StagingPool, KeepsAFewBuffersAndReplacesTheSmallestIdleOne) {
  StagingPool pool;
  std::vector<at::Tensor> busy;
  for (int i = 0; i < 6; ++i) busy.push_back(pool.bytes(size_t{1} << 16));  // all held: new each time
  EXPECT_EQ(pool.held(), size_t{4} << 16) << "keeps at most four";
  busy.clear();
  at::Tensor big = pool.bytes(size_t{1} << 20);  // none large enough: replaces an idle small one
  EXPECT_EQ(pool.held(), (size_t{3} << 16) + (size_t{1} << 20));
  const void* at = big.data_ptr();
  big.reset();
  EXPECT_EQ(pool.bytes(size_t{1} << 20).data_ptr(), at);
}
