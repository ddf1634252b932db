// The write window of a broadcast copied between the ranks' tensors
// (Segment::open_for_writes): a rank whose call fails must not return while
// the root is still writing into its tensor. The root's write is held in
// the middle by a page fault that the peer answers late (userfaultfd), so
// the order is the same in every run.
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "worker_scenarios.h"
#include "worker_util.h"

using namespace worker;

namespace {

// Serves the missing pages of [at, at + bytes) in this process: each fault
// is answered with a page of zeros once `release` has come. Counts the
// faults of threads of other processes (a peer's process_vm_writev).
class LatePages {
 public:
  LatePages(uint8_t* at, size_t bytes, std::chrono::steady_clock::time_point release) : release_(release) {
    fd_ = static_cast<int>(syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (fd_ < 0) return;
    uffdio_api api{};
    api.api = UFFD_API;
    api.features = UFFD_FEATURE_THREAD_ID;
    uffdio_register reg{};
    reg.range.start = reinterpret_cast<uintptr_t>(at);
    reg.range.len = bytes;
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(fd_, UFFDIO_API, &api) != 0 || ioctl(fd_, UFFDIO_REGISTER, &reg) != 0) {
      close(fd_);
      fd_ = -1;
      return;
    }
    server_ = std::thread([this] { serve(); });
  }
  ~LatePages() {
    stop_ = true;
    if (server_.joinable()) server_.join();
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  int foreign_faults() const { return foreign_.load(); }

 private:
  void serve() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    std::vector<uint8_t> zeros(page, 0);
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      uffd_msg msg{};
      if (read(fd_, &msg, sizeof msg) != static_cast<ssize_t>(sizeof msg) || msg.event != UFFD_EVENT_PAGEFAULT)
        continue;
      const std::string task = "/proc/self/task/" + std::to_string(msg.arg.pagefault.feat.ptid);
      if (access(task.c_str(), F_OK) != 0) ++foreign_;
      std::this_thread::sleep_until(release_);
      uffdio_copy copy{};
      copy.dst = msg.arg.pagefault.address & ~static_cast<uint64_t>(page - 1);
      copy.src = reinterpret_cast<uintptr_t>(zeros.data());
      copy.len = page;
      ioctl(fd_, UFFDIO_COPY, &copy);  // EEXIST where another fault of the page came first: served
    }
  }

  int fd_ = -1;
  std::chrono::steady_clock::time_point release_;
  std::atomic<bool> stop_{false};
  std::atomic<int> foreign_{0};
  std::thread server_;
};

// 2 ranks, rank 1 the root of a 1 MiB broadcast; rank 0's tensor is memory
// whose first half (the root's share, written by the root) it serves late:
// the root's write waits there until 2.5 s. Rank 0's timeout (1 s) passes
// first, so its call fails; it must return only after the root's write has
// ended, and what it writes into its tensor after returning must still be
// there a second later. Both ranks get a failure.
void scenario_shm_write_window() {
  ddp_group* g = join_then_set_timeout(1000);
  const int rank = ddp_group_rank(g);
  const size_t bytes = size_t{1} << 20;
  auto* buf = static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  WCHECK(buf != MAP_FAILED, "mmap of %zu bytes failed", bytes);
  if (rank == 1) std::memset(buf, 0x11, bytes);
  else std::memset(buf + bytes / 2, 0, bytes / 2);  // what this rank reads itself lands on present pages
  const auto t0 = std::chrono::steady_clock::now();
  const double release_s = 2.5;
  std::unique_ptr<LatePages> late;
  if (rank == 0) {
    late = std::make_unique<LatePages>(
        buf, bytes, t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(release_s)));
    WCHECK(late->ok(), "userfaultfd: %s", std::strerror(errno));
  }
  int64_t shape[1] = {static_cast<int64_t>(bytes / 4)};
  ddp_tensor* t = nullptr;
  WOK(ddp_tensor_from_blob(&t, buf, DDP_FLOAT32, shape, 1));
  const ddp_status st = ddp_broadcast(g, t, 1);
  const double took = seconds_since(t0);
  std::fprintf(stderr, "[rank %d] broadcast -> %s after %.2f s: %s\n", rank, ddp_status_string(st), took,
               ddp_last_error_message());
  WCHECK(st != DDP_OK, "the broadcast returned OK on rank %d", rank);
  if (rank == 0) {
    WCHECK(late->foreign_faults() > 0, "the root wrote nothing into this rank's tensor");
    WCHECK(took >= release_s - 0.05, "returned at %.2f s, while the root's write into it lasted until %.2f s", took,
           release_s);
    std::memset(buf, 0x5a, bytes);
    std::this_thread::sleep_for(std::chrono::seconds(1));
    size_t changed = 0;
    for (size_t i = 0; i < bytes; ++i) changed += buf[i] != 0x5a;
    WCHECK(changed == 0, "%zu bytes of the tensor changed after the call returned", changed);
    late.reset();
  }
  ddp_tensor_free(t);
  ddp_group_free(g);
  munmap(buf, bytes);
}

}  // namespace

WORKER_SCENARIO("shm_write_window", scenario_shm_write_window);
