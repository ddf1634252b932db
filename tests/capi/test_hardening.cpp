// Fault injection on one process (issue 10): inputs that used to crash, hang
// or be accepted, each answered now with a status and a message.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <cstdint>
#include <thread>
#include <string>
#include <utility>
#include <vector>

#include "capi_test_util.h"

namespace {

std::string last() { return ddp_last_error_message(); }

ddp_group* one_rank(int port = 0, int64_t timeout_ms = 20000) {
  ddp_env* env = nullptr;
  EXPECT_EQ(ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", port), DDP_OK) << last();
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = timeout_ms;
  ddp_group* g = nullptr;
  EXPECT_EQ(ddp_group_init(&g, env, &o), DDP_OK) << last();
  ddp_env_free(env);
  return g;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 4096; ++fd) n += fcntl(fd, F_GETFD) != -1;
  return n;
}

// The allocator hands a freed handle's memory to the next one of the same
// size; a stale handle must still be refused, not answer for the new one.
TEST(Hardening, AFreedHandleStaysFreedWhenItsMemoryIsReused) {
  float small[2] = {1, 2};
  float big[5] = {1, 2, 3, 4, 5};
  int64_t two[1] = {2}, five[1] = {5};
  for (int i = 0; i < 50; ++i) {
    ddp_tensor* stale = nullptr;
    ASSERT_EQ(ddp_tensor_from_blob(&stale, small, DDP_FLOAT32, two, 1), DDP_OK) << last();
    ddp_tensor_free(stale);
    ddp_tensor* fresh = nullptr;
    ASSERT_EQ(ddp_tensor_from_blob(&fresh, big, DDP_FLOAT32, five, 1), DDP_OK) << last();
    EXPECT_NE(stale, fresh);
    EXPECT_EQ(ddp_tensor_numel(stale), 0);
    EXPECT_EQ(ddp_tensor_data(stale), nullptr);
    void* dst = nullptr;
    EXPECT_EQ(ddp_tensor_copy_to(stale, &dst, sizeof(dst)), DDP_E_INVALID_ARGUMENT);
    EXPECT_NE(last().find("not a live ddp_tensor"), std::string::npos) << last();
    ddp_tensor_free(stale);  // must not free `fresh`
    EXPECT_EQ(ddp_tensor_numel(fresh), 5);
    ddp_tensor_free(fresh);
    EXPECT_EQ(ddp_tensor_numel(fresh), 0);
  }
}

// Handle lookups are remembered per thread (capi/src/handles.cpp): a handle
// each thread has just used, then freed on one of them, is refused on both.
TEST(Hardening, AHandleUsedThenFreedIsRefusedOnEveryThreadThatUsedIt) {
  float v[3] = {1, 2, 3};
  int64_t three[1] = {3};
  for (int i = 0; i < 20; ++i) {
    ddp_tensor* t = nullptr;
    ASSERT_EQ(ddp_tensor_from_blob(&t, v, DDP_FLOAT32, three, 1), DDP_OK) << last();
    int64_t seen_there = -1, after_there = -1;
    bool freed = false;
    std::mutex m;
    std::condition_variable cv;
    std::thread other([&] {
      const int64_t n = ddp_tensor_numel(t);
      std::unique_lock<std::mutex> lock(m);
      seen_there = n;
      cv.wait(lock, [&] { return freed; });
      after_there = ddp_tensor_numel(t);
    });
    EXPECT_EQ(ddp_tensor_numel(t), 3);
    while (true) {  // the other thread has looked it up
      std::lock_guard<std::mutex> lock(m);
      if (seen_there != -1) break;
    }
    ddp_tensor_free(t);
    {
      std::lock_guard<std::mutex> lock(m);
      freed = true;
    }
    cv.notify_all();
    other.join();
    EXPECT_EQ(seen_there, 3);
    EXPECT_EQ(ddp_tensor_numel(t), 0) << "the freeing thread still answered for its freed handle";
    EXPECT_EQ(after_there, 0) << "another thread still answered for a freed handle";
  }
}

TEST(Hardening, ShapesWhoseSizeOverflowsAreRefused) {
  float x = 0;
  ddp_tensor* t = reinterpret_cast<ddp_tensor*>(0x1);
  int64_t huge[1] = {int64_t{1} << 62};  // 2^62 float32: 2^64 bytes, 0 after the wrap
  EXPECT_EQ(ddp_tensor_from_blob(&t, &x, DDP_FLOAT32, huge, 1), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(t, nullptr);
  EXPECT_NE(last().find("overflow"), std::string::npos) << last();
  int64_t product[2] = {int64_t{1} << 32, int64_t{1} << 32};  // count 2^64
  EXPECT_EQ(ddp_tensor_from_blob(&t, &x, DDP_UINT8, product, 2), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_tensor_new(&t, DDP_FLOAT64, huge, 1, ddp_device{DDP_DEVICE_CPU, 0}), DDP_E_INVALID_ARGUMENT);
  int64_t with_zero[2] = {0, int64_t{1} << 62};  // empty: no bytes at all
  ASSERT_EQ(ddp_tensor_from_blob(&t, nullptr, DDP_FLOAT32, with_zero, 2), DDP_OK) << last();
  ddp_tensor_free(t);
}

TEST(Hardening, TimeoutsBeyondTheMaximumAreRefusedAndTheGroupStaysUsable) {
  ddp_env* env = nullptr;
  ASSERT_EQ(ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", 0), DDP_OK);
  for (int64_t ms : {int64_t{10000000000000}, int64_t{100000000000000}, INT64_MAX}) {
    ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
    o.timeout_ms = ms;
    ddp_group* g = reinterpret_cast<ddp_group*>(0x1);
    EXPECT_EQ(ddp_group_init(&g, env, &o), DDP_E_INVALID_ARGUMENT) << ms;
    EXPECT_NE(last().find("exceeds the maximum"), std::string::npos) << last();
  }
  ddp_env_free(env);
  ddp_group* g = one_rank();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(ddp_group_set_timeout(g, INT64_MAX), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_group_set_timeout(g, 0), DDP_E_INVALID_ARGUMENT);
  float v = 2;
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, &v, DDP_FLOAT32, nullptr, 0), DDP_OK);
  ddp_work* w = nullptr;
  ASSERT_EQ(ddp_all_reduce_async(g, t, DDP_SUM, &w), DDP_OK) << last();
  EXPECT_EQ(ddp_work_wait(w, INT64_MAX), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(ddp_work_wait(w, -1), DDP_OK) << last();
  ddp_work_free(w);
  EXPECT_EQ(ddp_all_reduce(g, t, DDP_SUM), DDP_OK) << last();  // not broken by the refused values
  EXPECT_EQ(ddp_group_is_broken(g), 0);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

TEST(Hardening, ResultsOfTheWrongKindOfWorkAreRefused) {
  ddp_group* g = one_rank();
  float v = 1;
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, &v, DDP_FLOAT32, nullptr, 0), DDP_OK);
  ddp_work* w = nullptr;
  ASSERT_EQ(ddp_all_reduce_async(g, t, DDP_SUM, &w), DDP_OK);
  ASSERT_EQ(ddp_work_wait(w, -1), DDP_OK);
  ddp_buffer* b = reinterpret_cast<ddp_buffer*>(0x1);
  EXPECT_EQ(ddp_work_result_buffer(w, &b), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(b, nullptr);
  EXPECT_NE(last().find("all_reduce"), std::string::npos) << last();
  int d = 7;
  EXPECT_EQ(ddp_work_result_decision(w, &d), DDP_E_INVALID_ARGUMENT);
  ddp_work_free(w);
  ASSERT_EQ(ddp_reduce_boolean_decision_async(g, 1, 1, &w), DDP_OK);
  ASSERT_EQ(ddp_work_wait(w, -1), DDP_OK);
  EXPECT_EQ(ddp_work_result_decision(w, &d), DDP_OK) << last();
  EXPECT_EQ(d, 1);
  ddp_work_free(w);
  ddp_tensor_free(t);
  ddp_group_free(g);
}

TEST(Hardening, WorksReducersAndAveragersOutliveTheirGroupHandle) {
  ddp_group* g = one_rank();
  std::vector<float> grad(8, 3.0f), param(8, 1.0f);
  int64_t n[1] = {8};
  ddp_tensor *gt = nullptr, *pt = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&gt, grad.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&pt, param.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ddp_work* w = nullptr;
  ASSERT_EQ(ddp_all_reduce_async(g, gt, DDP_SUM, &w), DDP_OK);
  ddp_reducer* r = nullptr;
  ASSERT_EQ(ddp_reducer_new(&r, g, &pt, &gt, 1, nullptr), DDP_OK) << last();
  ddp_model_averager* avg = nullptr;
  ASSERT_EQ(ddp_model_averager_new(&avg, g, 1, 0), DDP_OK) << last();
  ddp_group_free(g);  // garbage-collection order: the group handle goes first
  EXPECT_EQ(ddp_work_wait(w, -1), DDP_OK) << last();
  ddp_work_free(w);
  EXPECT_EQ(ddp_reducer_mark_ready(r, 0), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_OK) << last();
  EXPECT_EQ(grad[0], 3.0f);
  EXPECT_EQ(ddp_model_averager_step(avg, &pt, 1), DDP_OK) << last();
  ddp_model_averager_free(avg);
  ddp_reducer_free(r);
  ddp_tensor_free(gt);
  ddp_tensor_free(pt);
}

ddp_status failing_hook(ddp_group*, const ddp_comm_bucket*, void*) { return DDP_E_BACKEND; }

TEST(Hardening, FinishAfterAFailedMarkReadyReturnsAStatus) {
  ddp_group* g = one_rank();
  std::vector<float> a(4, 1.0f), b(4, 2.0f);
  int64_t n[1] = {4};
  ddp_tensor* grads[2] = {nullptr, nullptr};
  ASSERT_EQ(ddp_tensor_from_blob(&grads[0], a.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&grads[1], b.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  ddp_reducer* r = nullptr;
  ASSERT_EQ(ddp_reducer_new(&r, g, nullptr, grads, 2, &o), DDP_OK) << last();
  ddp_comm_hook* hook = nullptr;
  ASSERT_EQ(ddp_comm_hook_custom(&hook, failing_hook, nullptr), DDP_OK);
  ASSERT_EQ(ddp_reducer_set_comm_hook(r, hook), DDP_OK) << last();
  ddp_status s0 = ddp_reducer_mark_ready(r, 0);
  ddp_status s1 = ddp_reducer_mark_ready(r, 1);
  EXPECT_TRUE(s0 == DDP_E_BACKEND || s1 == DDP_E_BACKEND) << ddp_status_string(s0) << " " << ddp_status_string(s1);
  EXPECT_NE(ddp_reducer_finish(r), DDP_OK);  // used to dereference a bucket that never started
  EXPECT_NE(ddp_reducer_finish(r), DDP_OK);
  // The group is broken now: the next step fails with a status when its bucket starts.
  ddp_status m0 = ddp_reducer_mark_ready(r, 0), m1 = ddp_reducer_mark_ready(r, 1);
  EXPECT_TRUE(m0 == DDP_E_STATE || m1 == DDP_E_STATE) << ddp_status_string(m0) << " " << ddp_status_string(m1);
  EXPECT_NE(ddp_reducer_finish(r), DDP_OK);
  ddp_comm_hook_free(hook);
  ddp_reducer_free(r);
  ddp_tensor_free(grads[0]);
  ddp_tensor_free(grads[1]);
  ddp_group_free(g);
}

TEST(Hardening, OneGradientBufferTwiceIsRefused) {
  ddp_group* g = one_rank();
  std::vector<float> a(16, 1.0f);
  int64_t n[1] = {8};
  ddp_tensor *t1 = nullptr, *t2 = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t1, a.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&t2, a.data() + 4, DDP_FLOAT32, n, 1), DDP_OK);  // overlaps t1
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  ddp_tensor* same[2] = {t1, t1};
  ddp_tensor* overlapping[2] = {t1, t2};
  ddp_reducer* r = reinterpret_cast<ddp_reducer*>(0x1);
  EXPECT_EQ(ddp_reducer_new(&r, g, nullptr, same, 2, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("gradients 0 and 1 share memory"), std::string::npos) << last();
  EXPECT_EQ(ddp_reducer_new(&r, g, nullptr, overlapping, 2, &o), DDP_E_INVALID_ARGUMENT);
  EXPECT_EQ(r, nullptr);
  ddp_tensor_free(t1);
  ddp_tensor_free(t2);
  ddp_group_free(g);
}

TEST(Hardening, ABrokenGroupFreedLeavesThePortFreeForTheNextGroup) {
  int port = free_port();
  int baseline = -1;
  for (int cycle = 0; cycle < 4; ++cycle) {
    ddp_group* g = one_rank(port, 1000);
    ASSERT_NE(g, nullptr) << "cycle " << cycle << ": " << last();
    if (cycle == 1) baseline = open_fds();
    // Break it: a custom hook that fails breaks the group, as any peer failure does.
    std::vector<float> a(4, 1.0f);
    int64_t n[1] = {4};
    ddp_tensor* t = nullptr;
    ddp_tensor_from_blob(&t, a.data(), DDP_FLOAT32, n, 1);
    ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
    o.broadcast_parameters = 0;
    ddp_reducer* r = nullptr;
    ASSERT_EQ(ddp_reducer_new(&r, g, nullptr, &t, 1, &o), DDP_OK) << last();
    ddp_comm_hook* hook = nullptr;
    ddp_comm_hook_custom(&hook, failing_hook, nullptr);
    ddp_reducer_set_comm_hook(r, hook);
    EXPECT_NE(ddp_reducer_mark_ready(r, 0), DDP_OK);
    EXPECT_EQ(ddp_group_is_broken(g), 1);
    ddp_comm_hook_free(hook);
    ddp_reducer_free(r);
    ddp_tensor_free(t);
    ddp_group_free(g);
  }
  // The reaper returns each broken backend's threads and sockets once its
  // timeout (1 s) and margin (2 s) have passed.
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  EXPECT_LE(open_fds(), baseline + 2) << "file descriptors of broken groups were not returned";
}

TEST(Hardening, ManyInitFreeCyclesOnOnePort) {
  int port = free_port();
  for (int i = 0; i < 30; ++i) {
    ddp_group* g = one_rank(port, 20000);
    ASSERT_NE(g, nullptr) << "cycle " << i << ": " << last();
    ddp_group_free(g);
  }
}

TEST(Hardening, MasterPortZeroMeansAnyFreePortForOneProcess) {
  const char* vars[] = {"WORLD_SIZE=1", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=0", nullptr};
  ddp_env* e = nullptr;
  ASSERT_EQ(ddp_env_from_vars(&e, vars, nullptr), DDP_OK) << last();
  EXPECT_EQ(ddp_env_master_port(e), 0);
  ddp_group* g = nullptr;
  EXPECT_EQ(ddp_group_init(&g, e, nullptr), DDP_OK) << last();
  ddp_group_free(g);
  ddp_env_free(e);
  const char* two[] = {"WORLD_SIZE=2", "RANK=0", "MASTER_PORT=0", nullptr};
  EXPECT_EQ(ddp_env_from_vars(&e, two, nullptr), DDP_E_INVALID_ARGUMENT);
  EXPECT_NE(last().find("needs world size 1"), std::string::npos) << last();
}

TEST(Hardening, TheStoreListensOnTheMasterAddressOnly) {
  int port = free_port();
  ddp_group* g = one_rank(port);
  ASSERT_NE(g, nullptr);
  // 127.0.0.2 is loopback too: a store bound to every interface accepts it.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << "the store accepted 127.0.0.2";
  close(fd);
  ddp_group_free(g);
}

TEST(Hardening, MalformedSlurmNodeListsAreErrors) {
  for (const char* list : {"node[1-", "a[3-1]", "node]1[", "n[]", "n[x-2]", "n[1-2", "[[1]]"}) {
    std::string v = std::string("SLURM_NODELIST=") + list;
    const char* vars[] = {"SLURM_NTASKS=2", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", v.c_str(),
                          nullptr};
    ddp_env* e = reinterpret_cast<ddp_env*>(0x1);
    EXPECT_EQ(ddp_env_from_vars(&e, vars, nullptr), DDP_E_INVALID_ARGUMENT) << list;
    EXPECT_NE(last().find(std::string("SLURM_NODELIST='") + list + "'"), std::string::npos) << last();
  }
  struct Good { const char* list; const char* first; };
  for (Good c : {Good{"n[1-2]x[3-4]", "n1x3"}, Good{"node[01-04,07],gpu2", "node01"}, Good{"alpha,beta", "alpha"},
                 Good{"rack[2]n[05,9]-ib", "rack2n05-ib"}}) {
    std::string v = std::string("SLURM_NODELIST=") + c.list;
    const char* vars[] = {"SLURM_NTASKS=2", "SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", v.c_str(),
                          nullptr};
    ddp_env* e = nullptr;
    ASSERT_EQ(ddp_env_from_vars(&e, vars, nullptr), DDP_OK) << c.list << ": " << last();
    EXPECT_STREQ(ddp_env_master_addr(e), c.first);
    ddp_env_free(e);
  }
}

TEST(Hardening, LsfRankFileMustBeABoundedRegularFile) {
  std::string fifo = testing::TempDir() + "/ddp_rankfile_fifo";
  unlink(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    std::string rf = "LSB_DJOB_RANKFILE=" + path;
    const char* vars[] = {"LSB_JOBID=1", rf.c_str(), "JSM_NAMESPACE_LOCAL_RANK=0", "JSM_NAMESPACE_SIZE=1",
                          "JSM_NAMESPACE_RANK=0", nullptr};
    ddp_env* e = reinterpret_cast<ddp_env*>(0x1);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ddp_env_from_vars(&e, vars, nullptr), DDP_E_INVALID_ARGUMENT) << path;  // used to hang / grow
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_NE(last().find("not a regular file"), std::string::npos) << last();
  }
  unlink(fifo.c_str());
}

}  // namespace

namespace {
std::vector<size_t> bucket_of(ddp_reducer* r, size_t b) {
  size_t count = 0;
  EXPECT_EQ(ddp_reducer_bucket_indices(r, b, nullptr, 0, &count), DDP_OK);
  std::vector<size_t> out(count);
  EXPECT_EQ(ddp_reducer_bucket_indices(r, b, out.data(), count, &count), DDP_OK);
  return out;
}
}  // namespace

// static_graph on one rank with the caller's buffers: the first step
// records, the buckets are rebuilt after the second in its ready order
// (unused last), and a step whose graph differs is refused by name, after
// which the next regular step works.
TEST(Hardening, StaticGraphRecordsRebuildsAndRefusesAChangedGraph) {
  ddp_group* g = one_rank();
  std::vector<float> a(4, 1.0f), b(4, 2.0f), c(4, 3.0f);
  int64_t n[1] = {4};
  ddp_tensor* grads[3] = {nullptr, nullptr, nullptr};
  ASSERT_EQ(ddp_tensor_from_blob(&grads[0], a.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&grads[1], b.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ASSERT_EQ(ddp_tensor_from_blob(&grads[2], c.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  o.static_graph = 1;
  ddp_reducer* r = nullptr;
  ASSERT_EQ(ddp_reducer_new(&r, g, nullptr, grads, 3, &o), DDP_OK) << last();
  EXPECT_EQ(bucket_of(r, 0), (std::vector<size_t>{0, 1, 2}));  // one bucket until the rebuild
  // Step 1: gradient 1 is never marked (unused: zeros).
  EXPECT_EQ(ddp_reducer_mark_ready(r, 0), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_mark_ready(r, 2), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_OK) << last();
  EXPECT_EQ(b[0], 0.0f);
  EXPECT_EQ(c[0], 3.0f);
  // Step 2: 2 before 0.
  EXPECT_EQ(ddp_reducer_mark_ready(r, 2), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_mark_ready(r, 0), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_OK) << last();
  ASSERT_EQ(ddp_reducer_bucket_count(r), 1u);
  EXPECT_EQ(bucket_of(r, 0), (std::vector<size_t>{2, 0, 1}));
  // Step 3: the unused gradient shows up.
  EXPECT_EQ(ddp_reducer_mark_ready(r, 1), DDP_E_STATE);
  EXPECT_NE(last().find("gradient 1 was marked ready in this step but never in the first"), std::string::npos) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_E_STATE);
  // Step 4: a used one is missing.
  EXPECT_EQ(ddp_reducer_mark_ready(r, 0), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_E_STATE);
  EXPECT_NE(last().find("gradients 2 were used in the first step"), std::string::npos) << last();
  // Step 5: as recorded again.
  c.assign(4, 5.0f);
  EXPECT_EQ(ddp_reducer_mark_ready(r, 0), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_mark_ready(r, 2), DDP_OK) << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_OK) << last();
  EXPECT_EQ(c[0], 5.0f);
  ddp_reducer_free(r);
  for (auto* t : grads) ddp_tensor_free(t);
  ddp_group_free(g);
}

// A program built against version 1 of ddp_reducer_options (before
// static_graph) is served within its own struct.
TEST(Hardening, AVersionOneReducerCallerIsServedWithinItsOwnStruct) {
  const size_t v1 = offsetof(ddp_reducer_options, static_graph);
  std::vector<unsigned char> memory(v1 + 8, 0xAB);
  auto* o = reinterpret_cast<ddp_reducer_options*>(memory.data());
  ASSERT_EQ(ddp_reducer_options_init(o, 1), DDP_OK) << last();
  for (size_t i = v1; i < memory.size(); ++i) ASSERT_EQ(memory[i], 0xAB) << "byte " << i << " written";
  EXPECT_EQ(o->version, 1u);
  o->broadcast_parameters = 0;
  std::unique_ptr<unsigned char[]> exact(new unsigned char[v1]);
  std::memcpy(exact.get(), memory.data(), v1);
  ddp_group* g = one_rank();
  std::vector<float> a(4, 1.0f);
  int64_t n[1] = {4};
  ddp_tensor* t = nullptr;
  ASSERT_EQ(ddp_tensor_from_blob(&t, a.data(), DDP_FLOAT32, n, 1), DDP_OK);
  ddp_reducer* r = nullptr;
  ASSERT_EQ(ddp_reducer_new(&r, g, nullptr, &t, 1, reinterpret_cast<ddp_reducer_options*>(exact.get())), DDP_OK)
      << last();
  EXPECT_EQ(ddp_reducer_finish(r), DDP_E_STATE);  // not static: an unmarked gradient is the caller's mistake
  ddp_reducer_free(r);
  ddp_tensor_free(t);
  ddp_group_free(g);
  EXPECT_EQ(ddp_reducer_options_init(o, 3), DDP_E_INVALID_ARGUMENT);
}

namespace {
// A group over shared memory with one environment variable set, the
// variable unset again afterwards: the status, and the message.
std::pair<ddp_status, std::string> shm_group_with(const char* name, const char* value) {
  setenv(name, value, 1);
  ddp_env* env = nullptr;
  EXPECT_EQ(ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", 0), DDP_OK) << last();
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.backend = "shm";
  ddp_group* g = nullptr;
  ddp_status s = ddp_group_init(&g, env, &o);
  std::string message = last();
  ddp_group_free(g);
  ddp_env_free(env);
  unsetenv(name);
  return {s, message};
}
}  // namespace

// The shm backend's tuning variables are checked before the segment is made,
// each named in its refusal; values in range are taken.
TEST(Hardening, ShmTuningVariablesOutOfRangeAreRefusedByName) {
  for (const char* bad : {"fast", "-1", "1000001", "5us"}) {
    auto [s, message] = shm_group_with("DDP_SHM_SPIN_US", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_SPIN_US='") + bad + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("microseconds from 0 to 1000000"), std::string::npos) << message;
  }
  for (const char* bad : {"32", "262145", "1M"}) {
    auto [s, message] = shm_group_with("DDP_SHM_SLOT_KIB", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_SLOT_KIB='") + bad + "'"), std::string::npos) << message;
  }
  for (const char* bad : {"0", "33", "deep"}) {
    auto [s, message] = shm_group_with("DDP_SHM_POST_RING", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_POST_RING='") + bad + "'"), std::string::npos) << message;
  }
  for (const char* bad : {"off", "2", "no"}) {
    auto [s, message] = shm_group_with("DDP_SHM_CMA", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_CMA='") + bad + "'"), std::string::npos) << message;
  }
  EXPECT_EQ(shm_group_with("DDP_SHM_CMA", "0").first, DDP_OK);
  for (const char* bad : {"yes", "-1", "2"}) {
    auto [s, message] = shm_group_with("DDP_SHM_STREAMING", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_STREAMING='") + bad + "'"), std::string::npos) << message;
  }
  EXPECT_EQ(shm_group_with("DDP_SHM_STREAMING", "1").first, DDP_OK);
  for (const char* bad : {"on", "-1", "2"}) {
    auto [s, message] = shm_group_with("DDP_SHM_LIGHT_WAKES", bad);
    EXPECT_EQ(s, DDP_E_INVALID_ARGUMENT) << bad;
    EXPECT_NE(message.find(std::string("DDP_SHM_LIGHT_WAKES='") + bad + "'"), std::string::npos) << message;
  }
  EXPECT_EQ(shm_group_with("DDP_SHM_LIGHT_WAKES", "0").first, DDP_OK);
  EXPECT_EQ(shm_group_with("DDP_SHM_POST_RING", "1").first, DDP_OK);
  EXPECT_EQ(shm_group_with("DDP_SHM_SPIN_US", "0").first, DDP_OK);
  EXPECT_EQ(shm_group_with("DDP_SHM_SLOT_KIB", "64").first, DDP_OK);
}
