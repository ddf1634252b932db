// How exceptions from ATen and c10d become statuses (core/comm/failure.h).
#include <ATen/Functions.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "comm/backend_factory.h"
#include "comm/failure.h"
#include "few_descriptors.h"
#include "file_size_limit.h"
#include "common/error.h"

namespace ddp::core {
namespace {

// What c10's CPU allocator throws when the host has no memory for a tensor
// (a plain c10::Error, not c10::OutOfMemoryError).
c10::Error cpu_allocator_refusal() {
  try {
    at::empty({int64_t{1} << 46}, at::kFloat);  // 256 TiB
  } catch (const c10::Error& e) {
    return e;
  }
  ADD_FAILURE() << "a 256 TiB tensor was allocated";
  return c10::Error({"cpu_allocator_refusal", __FILE__, __LINE__}, "no refusal");
}

TEST(Failure, AllocatorRefusalsAreOutOfMemoryAndOtherAtenErrorsAreNot) {
  const c10::Error refusal = cpu_allocator_refusal();
  EXPECT_TRUE(is_out_of_memory(refusal)) << short_what(refusal);
  EXPECT_EQ(classify_exception(refusal), Status::NoMemory) << short_what(refusal);

  const c10::OutOfMemoryError cuda_style({"f", "file", 1}, "CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_EQ(classify_exception(cuda_style), Status::NoMemory);

  try {
    at::ones({2, 3}).add(at::ones({4}));
    FAIL() << "shapes [2, 3] and [4] were added";
  } catch (const c10::Error& e) {
    EXPECT_FALSE(is_out_of_memory(e)) << short_what(e);
    EXPECT_EQ(classify_exception(e), Status::Backend) << short_what(e);
  }
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("can't allocate memory")))
      << "only c10's errors are read for the allocator's words";
}

TEST(Failure, FailFromAtenKeepsTheCallersStatusUnlessMemoryRanOut) {
  try {
    fail_from_aten(Status::InvalidArgument, "add", cpu_allocator_refusal());
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::NoMemory);
    EXPECT_NE(std::string(e.what()).find("add: out of memory: "), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("Exception raised from"), std::string::npos) << "no C++ stack trace";
  }
  try {
    fail_from_aten(Status::InvalidArgument, "add", std::runtime_error("shapes differ"));
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::InvalidArgument);
    EXPECT_STREQ(e.what(), "add: shapes differ");
  }
}

}  // namespace

// Gloo makes a socket per other rank (and a few more) while it connects; a
// connection it cannot accept for want of a descriptor ended its event
// loop's thread holding the lock the connecting thread waits for, so that
// rank hung for good. The room is checked first: Status::IO at once,
// naming what is needed and the limit.
TEST(Failure, AGlooBackendWithoutRoomForItsConnectionsFailsAtOnceSayingSo) {
  LimitedRun starved = run_in_child([]() -> std::string {
    leave_free_descriptors(5);
    BackendSpec spec;
    spec.store = c10::make_intrusive<c10d::HashStore>();
    spec.size = 4;
    spec.timeout = Millis(3000);
    spec.master_addr = "127.0.0.1";
    try {
      make_gloo_backend(spec);
      return "connected";
    } catch (const Error& e) {
      return std::string(e.status() == Status::IO ? "IO: " : "not IO: ") + e.what();
    } catch (const std::exception& e) {
      return std::string("not a libddp error: ") + e.what();
    }
  });
  EXPECT_TRUE(starved.exited) << starved.report;
  EXPECT_EQ(starved.report.rfind("IO: the Gloo backend of rank 0 of 4 needs about 9 more file descriptors", 0), 0u)
      << starved.report;
  EXPECT_NE(starved.report.find("only 5 of this process's limit of "), std::string::npos) << starved.report;
  EXPECT_NE(starved.report.find("raise ulimit -n"), std::string::npos) << starved.report;
}

// A backend's error that does not say why (Gloo's "Cannot resolve
// 127.0.0.1 to a (local) address" when it could not make a socket) names a
// lack of descriptors where there is one (Status::IO), and is left as it is
// where there is none.
TEST(Failure, ABackendErrorNamesALackOfDescriptors) {
  auto failure = []() -> std::string {
    BackendSpec spec;
    spec.size = 2;
    Error e = backend_connect_failure(spec, std::runtime_error("Cannot resolve 127.0.0.1 to a (local) address"),
                                      "gloo backend");
    return std::string(e.status() == Status::IO ? "IO: " : "not IO: ") + e.what();
  };
  LimitedRun starved = run_in_child([&] {
    leave_free_descriptors(0);
    return failure();
  });
  EXPECT_TRUE(starved.exited) << starved.report;
  EXPECT_EQ(starved.report.rfind("IO: gloo backend could not connect rank 0 of 2: Cannot resolve", 0), 0u)
      << starved.report;
  EXPECT_NE(starved.report.find("raise ulimit -n"), std::string::npos) << starved.report;
  const std::string plain = failure();
  EXPECT_EQ(plain.rfind("not IO: gloo backend could not connect rank 0 of 2: Cannot resolve", 0), 0u) << plain;
  EXPECT_EQ(plain.find("ulimit"), std::string::npos) << plain;
}

}  // namespace ddp::core
