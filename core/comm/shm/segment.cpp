#include "comm/shm/segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "common/asymmetric_fence.h"
#include "common/copy_kernel.h"
#include "common/error.h"
#include "common/regular_file.h"

namespace ddp::core::shm {
namespace {

constexpr uint64_t kMagic = 0x6464702d73686d31ULL;  // "ddp-shm1"
constexpr size_t kLine = 64;
constexpr size_t kControlOffset = 512;
// How a wait spends its time before it sleeps: spinning on the peer's line
// for Segment::spin_for_ (none when the host's ranks outnumber the cores
// this process may run on, where a spinning rank holds the core its peer
// needs), then some yields (a peer waiting for this core), then futex
// sleeps of at most kSleepSlice.
constexpr int kYields = 32;
constexpr Millis kSleepSlice{2};
constexpr Millis kLivenessEvery{100};

}  // namespace

struct Segment::PackedCall {
  uint32_t what;
  uint32_t dtype_and_count_high;  // dtype + 1 in the top 8 bits, then count's bits 32-55
  uint32_t count_low;
};

namespace {
using PackedCall = Segment::PackedCall;

// What a rank writes on every collective, in one cache line, so that a
// peer's wait brings the phase, the call and a small payload over at once.
struct alignas(kLine) RankLine {
  std::atomic<uint32_t> phase;
  std::atomic<uint32_t> sleepers;
  // The last two announced calls (by parity): a rank announces call k+2
  // only after a barrier of call k+1, which every rank passes only after
  // reading call k's.
  PackedCall calls[2];
  // Segment::inline_data(): the halves of a payload of at most
  // Segment::kInlineBytes, used instead of the slots.
  alignas(16) uint8_t payload[2][Segment::kInlineBytes];
};
static_assert(sizeof(RankLine) == kLine, "one cache line per rank");
// One entry of a rank's post ring (Segment::post): the posted call and its
// data, in the same line up to 44 bytes. An entry is rewritten kPostRing
// calls later at the soonest, once every peer has finished reading it.
struct alignas(kLine) PostEntry {
  std::atomic<uint64_t> seq;  // the posted call's number + 1; 0: none yet
  PackedCall call;
  uint8_t head[kLine - sizeof(uint64_t) - sizeof(PackedCall)];
  uint8_t rest[Segment::kPostBytes];  // a payload longer than head
};
static_assert(sizeof(PostEntry) == kLine + Segment::kPostBytes, "a line, then the long payloads");
// The last call a rank found differing from the others' (compare_calls),
// for a peer that posted that call and did not wait to compare it.
struct alignas(kLine) MismatchReport {
  std::atomic<uint64_t> call;  // its number + 1; 0: none
  PackedCall mine;
};
// A broadcast's call as a peer of its root announces it (Segment::
// await_post), or the no-call of a rank whose call fails after its post
// (fail_after_post): kept for kCallRing calls, because a root that ran
// ahead compares it calls later, and a peer that waits for the root alone
// may by then have made more calls.
struct alignas(32) CallEntry {
  std::atomic<uint64_t> seq;  // the call's number + 1; 0: none yet
  PackedCall call;
};
// Who a rank is, for the liveness check (written once), and whom it waits
// for while its wait sleeps, so that a rank that times out can name the
// rank at the end of a chain of waits rather than the first link
// (Segment::waits_behind).
struct alignas(kLine) RankInfo {
  int32_t pid;
  uint64_t start_time;  // from /proc/<pid>/stat, so that a reused pid is not taken for the peer
  uint64_t probe_at;  // the address of cma_probe in this rank's process (Segment::read_from, write_to)
  // (local rank waited for + 1) << 32 | the phase awaited; 0: not sleeping in a wait.
  std::atomic<uint64_t> waiting;
  // Its write window (Segment::open_for_writes): a state in the top two
  // bits, the window's number below.
  std::atomic<uint64_t> writes;
};
static_assert(sizeof(RankInfo) == kLine, "one cache line per rank");

PackedCall pack(const Segment::Call& c) {
  const uint64_t count = static_cast<uint64_t>(c.count) & ((uint64_t{1} << 56) - 1);
  return {c.what, (static_cast<uint32_t>(c.dtype + 1) << 24) | static_cast<uint32_t>(count >> 32),
          static_cast<uint32_t>(count)};
}
bool same(const PackedCall& a, const PackedCall& b) {
  return a.what == b.what && a.dtype_and_count_high == b.dtype_and_count_high && a.count_low == b.count_low;
}
Segment::Call unpack(const PackedCall& p) {
  Segment::Call c;
  c.what = p.what;
  c.dtype = static_cast<int32_t>(p.dtype_and_count_high >> 24) - 1;
  c.count = static_cast<int64_t>((static_cast<uint64_t>(p.dtype_and_count_high & 0xffffff) << 32) | p.count_low);
  return c;
}
// Whether phase v is at or past `phase` (phases wrap at 2^32: compared by difference).
bool reached(uint32_t v, uint32_t phase) { return static_cast<int32_t>(v - phase) >= 0; }
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be plain 32-bit words");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "call numbers are shared between processes");

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, Millis at_most) {
  timespec ts{};
  ts.tv_sec = at_most.count() / 1000;
  ts.tv_nsec = (at_most.count() % 1000) * 1000000;
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks), or 0 when the
// process is gone or a zombie. Read with read(2): a process that ends
// between the open and the read makes the read fail with ESRCH, which
// std::ifstream threw as "basic_filebuf::underflow error reading the file",
// and a peer killed at that moment was reported as a backend error instead
// of DDP_E_PEER_FAILED (seen once under ASan, in
// ShmWorlds.PeerKilledWhileTheRootWritesIntoItGivesPeerFailed).
uint64_t live_start_time(int pid) {
  const int fd = open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::string s, why;
  const bool read = read_to_end(fd, &s, &why);
  close(fd);
  if (!read) return 0;
  auto close_paren = s.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(s.substr(close_paren + 2));
  std::string field;
  rest >> field;  // field 3: state
  if (field == "Z" || field == "X" || field == "x") return 0;
  for (int i = 4; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::stoull(field);
  return 0;
}

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

}  // namespace

struct Segment::Header {
  uint64_t magic;
  uint64_t token;
  uint64_t slot_bytes;
  uint32_t size;
  alignas(kLine) std::atomic<uint32_t> aborted;
  int32_t abort_rank;
  int32_t abort_status;
  char abort_reason[256];
  alignas(kLine) std::atomic<uint64_t> advice[2];  // Segment::advice(), by the call's parity
};

namespace {
RankLine* lines(void* base) { return reinterpret_cast<RankLine*>(static_cast<uint8_t*>(base) + kControlOffset); }
RankInfo* infos(void* base, int size) { return reinterpret_cast<RankInfo*>(lines(base) + size); }
PostEntry* post_rings(void* base, int size) { return reinterpret_cast<PostEntry*>(infos(base, size) + size); }
// Rank r's entry for call number n.
PostEntry& post_entry(void* base, int size, int r, uint64_t n) {
  return post_rings(base, size)[r * Segment::kPostRing + static_cast<int>(n % Segment::kPostRing)];
}
MismatchReport* reports(void* base, int size) {
  return reinterpret_cast<MismatchReport*>(post_rings(base, size) + size * Segment::kPostRing);
}
CallEntry& call_entry(void* base, int size, int r, uint64_t n) {
  return reinterpret_cast<CallEntry*>(reports(base, size) + size)[r * Segment::kCallRing +
                                                                  static_cast<int>(n % Segment::kCallRing)];
}
size_t data_offset(int size) {
  return round_up(kControlOffset + size * (sizeof(RankLine) + sizeof(RankInfo) + Segment::kPostRing * sizeof(PostEntry) +
                                           sizeof(MismatchReport) + Segment::kCallRing * sizeof(CallEntry)),
                  4096);
}
}  // namespace

std::string Segment::map(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return errno_text("mmap");
  base_ = static_cast<uint8_t*>(p);
  mapped_ = bytes;
  header_ = static_cast<Header*>(p);
  return "";
}

// Local rank 0: a new memfd of `bytes`, mapped and stamped. Returns the
// failure or "", and in *fd the descriptor the others open.
std::string Segment::create(size_t bytes, uint64_t token, int* fd) {
  *fd = static_cast<int>(syscall(SYS_memfd_create, "ddp-shm", MFD_CLOEXEC));
  if (*fd < 0) return errno_text("memfd_create");
  if (ftruncate(*fd, static_cast<off_t>(bytes)) != 0) return errno_text("ftruncate");
  std::string problem = map(*fd, bytes);
  if (!problem.empty()) return problem;
  header_->token = token;
  header_->slot_bytes = slot_bytes_;
  header_->size = static_cast<uint32_t>(size_);
  header_->magic = kMagic;
  return "";
}

// The other ranks: local rank 0's segment, described by `where` ("pid fd
// token bytes", or "none <why>").
std::string Segment::attach(const std::string& where, size_t bytes) {
  std::istringstream in(where);
  std::string pid_text;
  int owner_fd = -1;
  uint64_t token = 0, total = 0;
  in >> pid_text >> owner_fd >> token >> total;
  if (pid_text == "none") return "local rank 0 could not create it";
  std::string path = "/proc/" + pid_text + "/fd/" + std::to_string(owner_fd);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return errno_text(("open " + path).c_str());
  struct stat st {};
  std::string problem;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != total || total != bytes)
    problem = path + " is not the segment local rank 0 created";
  else
    problem = map(fd, bytes);
  close(fd);
  // Another host's rank 0 may have the same pid and fd: the token tells
  // its segment from ours.
  if (problem.empty() && (header_->magic != kMagic || header_->token != token))
    problem = path + " belongs to another process (another host?)";
  return problem;
}

// A word each rank's peers read from its process at open, and write back
// unchanged, to learn whether this host lets them (Segment::read_from,
// write_to). Writable, so that the write can succeed.
constexpr uint64_t kCmaProbeValue = 0x6464702d636d6131ULL;  // "ddp-cma1"
volatile uint64_t cma_probe = kCmaProbeValue;

// Copies `bytes` between `local` in this process and `remote` in process
// `pid`: from it where `write` is false, into it where true. errno on failure.
int transfer_process(int pid, void* local, uintptr_t remote, size_t bytes, bool write) {
  size_t done = 0;
  while (done < bytes) {
    iovec here{static_cast<uint8_t*>(local) + done, bytes - done};
    iovec there{reinterpret_cast<void*>(remote + done), bytes - done};
    ssize_t n = write ? process_vm_writev(pid, &here, 1, &there, 1, 0) : process_vm_readv(pid, &here, 1, &there, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 ? EFAULT : errno;
    done += static_cast<size_t>(n);
  }
  return 0;
}

int cpus_available() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 0;
}

std::unique_ptr<Segment> Segment::open(c10d::Store& store, int local_rank, const std::vector<int>& global_ranks,
                                       const Options& options, Millis timeout, std::string* why_not) {
  static_assert(sizeof(Header) <= kControlOffset, "the header fits before the rank lines");
  const int size = static_cast<int>(global_ranks.size());
  const int halves = options.halves;
  const size_t slot_bytes = options.slot_bytes;
  const size_t bytes = data_offset(size) + static_cast<size_t>(size) * static_cast<size_t>(halves) * slot_bytes;
  std::unique_ptr<Segment> seg(new Segment());
  seg->halves_ = static_cast<size_t>(halves);
  seg->rank_ = local_rank;
  seg->size_ = size;
  seg->slot_bytes_ = slot_bytes;
  seg->global_ranks_ = global_ranks;
  seg->seen_.assign(static_cast<size_t>(size), 0);
  if (size > cpus_available() && cpus_available() > 0) seg->spin_for_ = Nanos(0);
  if (options.spin) seg->spin_for_ = *options.spin;
  auto to_bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  std::string problem;
  struct OwnedFd {
    int fd = -1;
    ~OwnedFd() {
      if (fd >= 0) close(fd);
    }
  } memfd;  // local rank 0's, open until every rank has mapped it (or gave up)
  if (local_rank == 0) {
    uint64_t token = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
    problem = seg->create(bytes, token, &memfd.fd);
    std::ostringstream where;
    if (problem.empty()) where << getpid() << " " << memfd.fd << " " << token << " " << bytes;
    else where << "none " << problem;
    store.set("segment", to_bytes(where.str()));
  } else {
    std::vector<uint8_t> raw = store.get("segment");
    problem = seg->attach(std::string(raw.begin(), raw.end()), bytes);
  }
  if (problem.empty()) {
    RankInfo& me = infos(seg->base_, size)[local_rank];
    me.pid = static_cast<int32_t>(getpid());
    me.start_time = live_start_time(getpid());
    me.probe_at = reinterpret_cast<uintptr_t>(&cma_probe);
  }
  store.set("mapped/" + std::to_string(local_rank), to_bytes(problem.empty() ? "ok" : problem));
  std::string reasons;
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("mapped/" + std::to_string(r));
  store.wait(keys, timeout);
  for (int r = 0; r < size; ++r) {
    std::vector<uint8_t> v = store.get(keys[r]);
    std::string s(v.begin(), v.end());
    if (s != "ok") reasons += (reasons.empty() ? "" : "; ") + std::string("rank ") + std::to_string(global_ranks[r]) + ": " + s;
  }
  // Every rank mapped it (or gave up): closing the memfd leaves no name
  // anywhere, only the mappings.
  if (!reasons.empty()) {
    if (why_not) *why_not = reasons;
    return nullptr;
  }
  // Whether a rank may read its peers' memory (read_from): each tries the
  // next rank's probe word, and all use it only if every one could (a
  // container without CAP_SYS_PTRACE, Yama's ptrace_scope, a seccomp filter
  // refuse it), so that every rank takes the same path. Not where the ranks
  // outnumber the cores a rank may use: there each peer's read and the
  // second barrier wait for the scheduler (4 ranks on 2 cores, 64 KiB
  // broadcast: 19.7-20.0 us against 13.5-17.6 through the slots).
  // Whether the host is crowded is agreed the same way (any rank that
  // has fewer cores than the host has ranks), since the collectives take
  // their paths by it: ranks with different CPU affinities would otherwise
  // split a call between paths that move different bytes.
  // Light wakes (raise_phase) too: a rank's wakes are light where its
  // process registered for the heavy fence; every rank's sleeps then fence
  // heavily if any rank's wakes are light. Crowded hosts too: there waits
  // sleep sooner, but each wake's stall cost more (4 ranks on 2 cores, p50,
  // alternating: 1 KiB broadcast 0.40 us against 0.71, 4 KiB all-reduce
  // 5.6 against 9.3).
  if (size > 1 && halves > 1) {
    const bool crowded = size > cpus_available() && cpus_available() > 0;
    const bool light = options.light_wakes && asymmetric_fences(FenceScope::Host);
    bool can = options.reads && !crowded;
    if (can) {
      const RankInfo& next = infos(seg->base_, size)[(local_rank + 1) % size];
      uint64_t word = 0;
      can = transfer_process(next.pid, &word, next.probe_at, sizeof word, false) == 0 && word == kCmaProbeValue &&
            transfer_process(next.pid, &word, next.probe_at, sizeof word, true) == 0;
    }
    store.set("host/" + std::to_string(local_rank),
              to_bytes(std::string(can ? "r" : "-") + (crowded ? "c" : "-") + (light ? "l" : "-")));
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back("host/" + std::to_string(r));
    store.wait(keys, timeout);
    bool all_read = true, any_crowded = false, any_light = false;
    for (const std::string& k : keys) {
      const std::vector<uint8_t> v = store.get(k);
      all_read = all_read && !v.empty() && v[0] == 'r';
      any_crowded = any_crowded || (v.size() > 1 && v[1] == 'c');
      any_light = any_light || (v.size() > 2 && v[2] == 'l');
    }
    seg->cma_ = all_read;
    seg->crowded_ = any_crowded;
    seg->light_wakes_ = light;
    seg->heavy_sleeps_ = any_light;
  }
  return seg;
}

Segment::~Segment() {
  if (base_) munmap(base_, mapped_);
}

uint8_t* Segment::slot(int r, int h) const {
  return base_ + data_offset(size_) + (static_cast<size_t>(r) * halves_ + h) * slot_bytes_;
}

uint64_t Segment::advice(uint64_t call) const { return header_->advice[call & 1].load(std::memory_order_acquire); }

void Segment::set_advice(uint64_t call, uint64_t word) {
  header_->advice[call & 1].store(word, std::memory_order_release);
}

uint8_t* Segment::inline_data(int r, int h) const { return lines(base_)[r].payload[h]; }

void Segment::abort(int status, const std::string& reason) {
  // 1 claims the word, 2 says the reason is written.
  uint32_t expected = 0;
  if (header_->aborted.compare_exchange_strong(expected, 1)) {
    header_->abort_rank = global_ranks_[rank_];
    header_->abort_status = status;
    std::strncpy(header_->abort_reason, reason.c_str(), sizeof(header_->abort_reason) - 1);
    header_->aborted.store(2, std::memory_order_release);
  }
  for (int r = 0; r < size_; ++r) futex_wake_all(&lines(base_)[r].phase);
}

void Segment::check_abort(const char* op) {
  if (header_->aborted.load(std::memory_order_acquire) != 2) return;
  char reason[sizeof(header_->abort_reason)];
  std::memcpy(reason, header_->abort_reason, sizeof(reason));
  reason[sizeof(reason) - 1] = 0;
  fail(static_cast<Status>(header_->abort_status),
       "another rank failed, so this one stops too: rank " + std::to_string(header_->abort_rank) + ": " + reason);
}

void Segment::read_from(int peer, void* to, uintptr_t from, size_t bytes, const char* op) {
  transfer(peer, to, from, bytes, false, op);
}

namespace {
// A write window's states (RankInfo::writes).
constexpr uint64_t kWindowOpen = uint64_t{1} << 62, kWindowWriting = uint64_t{2} << 62,
                   kWindowClosed = uint64_t{3} << 62, kWindowNumber = (uint64_t{1} << 62) - 1;
uint64_t window_word(uint64_t state, uint64_t window) { return state | (window & kWindowNumber); }
}  // namespace

void Segment::open_for_writes(uint64_t window) {
  infos(base_, size_)[rank_].writes.store(window_word(kWindowOpen, window), std::memory_order_release);
}

void Segment::close_for_writes(uint64_t window, int writer) {
  std::atomic<uint64_t>& word = infos(base_, size_)[rank_].writes;
  uint64_t seen = window_word(kWindowOpen, window);
  if (word.compare_exchange_strong(seen, window_word(kWindowClosed, window))) return;
  // A peer is writing: a kernel copy of at most a few MiB, unless the
  // writer stopped between taking the window and its copy.
  const auto until = Clock::now() + kWriteEndWait;
  const RankInfo& info = infos(base_, size_)[writer];
  while (word.load(std::memory_order_acquire) == window_word(kWindowWriting, window) && Clock::now() < until) {
    if (live_start_time(info.pid) != info.start_time) return;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

bool Segment::write_to(int peer, uint64_t window, uintptr_t to, const void* from, size_t bytes, const char* op) {
  std::atomic<uint64_t>& word = infos(base_, size_)[peer].writes;
  uint64_t seen = window_word(kWindowOpen, window);
  if (!word.compare_exchange_strong(seen, window_word(kWindowWriting, window))) return false;
  struct Done {  // the window is open again once the copy ends, even where it failed
    std::atomic<uint64_t>& word;
    uint64_t open;
    ~Done() { word.store(open, std::memory_order_release); }
  } done{word, window_word(kWindowOpen, window)};
  transfer(peer, const_cast<void*>(from), to, bytes, true, op);  // process_vm_writev only reads `from`
  return true;
}

void Segment::transfer(int peer, void* local, uintptr_t remote, size_t bytes, bool write, const char* op) {
  const RankInfo& info = infos(base_, size_)[peer];
  const int err = transfer_process(info.pid, local, remote, bytes, write);
  if (err == 0) return;
  // A peer that is exiting fails the copy with ESRCH, or EFAULT once its
  // pages are going.
  if (err == ESRCH || live_start_time(info.pid) != info.start_time) fail_peer_gone(peer, op);
  std::string msg = std::string(op) + " on shared memory: rank " + std::to_string(global_ranks_[rank_]) +
                    " could not " + (write ? "write into" : "read") + " rank " + std::to_string(global_ranks_[peer]) +
                    "'s memory: " + std::strerror(err);
  abort(static_cast<int>(Status::Backend), msg);
  fail(Status::Backend, msg);
}

void Segment::fail_peer_gone(int peer, const char* op) {
  std::string msg = std::string(op) + " on shared memory: rank " + std::to_string(global_ranks_[peer]) + " (pid " +
                    std::to_string(infos(base_, size_)[peer].pid) + ") has died";
  abort(static_cast<int>(Status::PeerFailed), msg);
  fail(Status::PeerFailed, msg);
}

void Segment::announce(const Call& call, std::string (*describe)(const Call&), const Deadline& deadline,
                       const char* op) {
  if (posted_) catch_up(deadline, op);
  else if (skipped_) rejoin(deadline, op);
  begin_[calls_ % kCallRing] = phase_ + 1;
  lines(base_)[rank_].calls[calls_ & 1] = pack(call);
  describe_ = describe;
  compare_pending_ = true;
}

void Segment::rejoin(const Deadline& deadline, const char* op) {
  // Every rank entered this rank's last call (a posted one): they have
  // finished reading what this rank wrote before it, in its line's call
  // slot and its halves, which this call may now rewrite.
  wait_all(deadline, op);
  skipped_ = false;
}

const PackedCall& Segment::call_of(int j, uint64_t n) const {
  const PostEntry& e = post_entry(base_, size_, j, n);
  if (e.seq.load(std::memory_order_acquire) == n + 1) return e.call;
  const CallEntry& c = call_entry(base_, size_, j, n);
  if (c.seq.load(std::memory_order_acquire) == n + 1) return c.call;
  return lines(base_)[j].calls[n & 1];
}

bool Segment::another_posted(uint64_t n) const {
  for (int j = 0; j < size_; ++j)
    if (j != rank_ && post_entry(base_, size_, j, n).seq.load(std::memory_order_acquire) == n + 1) return true;
  return false;
}

bool Segment::same_calls(uint64_t n) const {
  const PackedCall& mine = call_of(rank_, n);
  for (int j = 0; j < size_; ++j)
    if (!same(call_of(j, n), mine)) return false;
  return true;
}

std::string Segment::described(const Call& c) const {
  return c.what == kNoCall ? "no call (it reported that a call it posted before this one did not match)" : describe_(c);
}

std::string Segment::differences(uint64_t n, Call* mine) const {
  *mine = unpack(call_of(rank_, n));
  std::string differ;
  for (int j = 0; j < size_; ++j) {
    if (same(call_of(j, n), call_of(rank_, n))) continue;
    differ += "; rank " + std::to_string(global_ranks_[j]) + ": " + described(unpack(call_of(j, n)));
  }
  return differ;
}

void Segment::compare_calls() {
  compare_pending_ = false;
  const uint64_t n = calls_++;
  if (same_calls(n)) return;
  Call mine;
  const std::string differ = differences(n, &mine);
  if (!differ.empty()) refuse(n, mine, differ);
}

void Segment::report(uint64_t n, const Call& mine) {
  // A rank that posted call n did not wait to compare it: it reads this
  // when it next waits (reported_against_posts).
  MismatchReport& report = reports(base_, size_)[rank_];
  report.mine = pack(mine);
  report.call.store(n + 1, std::memory_order_release);
}

void Segment::refuse(uint64_t n, const Call& mine, const std::string& differ) {
  report(n, mine);
  throw CallMismatch("the ranks did not call the same collective (rank " + std::to_string(global_ranks_[rank_]) +
                     ": " + describe_(mine) + differ + "); nothing was combined and the group stays usable");
}

void Segment::catch_up(const Deadline& deadline, const char* op) {
  posted_ = false;
  // Every peer reached the last post: the posts before it are finished,
  // and any peer that found one differing has reported it.
  wait_all(deadline, op);
  skipped_ = false;
  Call mine;
  std::string differ = reported_against_posts(&mine);
  // The peers' calls of the last post are still where they announced
  // them: compared here, whether or not they have compared it yet.
  if (differ.empty() && !same_calls(last_post_)) differ = differences(last_post_, &mine);
  settled_ = calls_;
  if (!differ.empty()) fail_after_post(mine, differ, deadline, op);
}

std::string Segment::reported_against_posts(Call* posted) const {
  std::string differ;
  for (int j = 0; j < size_; ++j) {
    if (j == rank_) continue;
    const MismatchReport& report = reports(base_, size_)[j];
    const uint64_t tag = report.call.load(std::memory_order_acquire);
    // Only a call of this rank's that it has not settled and that it
    // posted: its entry still holds it (an entry is rewritten only after
    // every peer finished its call, which is after the peer's report).
    if (tag == 0 || tag - 1 < settled_) continue;
    const PostEntry& mine = post_entry(base_, size_, rank_, tag - 1);
    if (mine.seq.load(std::memory_order_relaxed) != tag) continue;
    if (differ.empty()) *posted = unpack(mine.call);
    differ += "; rank " + std::to_string(global_ranks_[j]) + ": " + described(unpack(report.mine));
  }
  return differ;
}

void Segment::fail_after_post(const Call& posted, const std::string& differ, const Deadline& deadline,
                              const char* op) {
  // The peers' calls of this number wait in their barrier: this rank makes
  // one too, announcing no call, which fails theirs. In its call ring, not
  // its line: a rank that ran ahead of some peers must not rewrite its
  // line's call slot before they have read it (rejoin()). Reported too,
  // for a root that posted this call and compares it only later.
  const uint64_t n = calls_++;
  begin_[n % kCallRing] = phase_ + 1;
  const Call none{kNoCall, -1, 0};
  CallEntry& entry = call_entry(base_, size_, rank_, n);
  entry.call = pack(none);
  entry.seq.store(n + 1, std::memory_order_release);
  report(n, none);
  compare_pending_ = false;
  posted_ = false;
  raise_phase();
  wait_all(deadline, op);
  skipped_ = false;
  settled_ = calls_;
  throw CallMismatch(std::string(op) + " was not run: a call before it, which this rank (rank " +
                     std::to_string(global_ranks_[rank_]) + ") posted as " + describe_(posted) +
                     ", did not match the other ranks' calls (" + differ.substr(2) +
                     "); every rank's call here fails, nothing was combined and the group stays usable");
}

void Segment::raise_phase() {
  const uint32_t p = ++phase_;
  RankLine& me = lines(base_)[rank_];
  // The flag handshake with a peer about to sleep (wait_for): this rank
  // stores its phase and then looks for sleepers; the peer counts itself a
  // sleeper and then looks at the phase. A full fence here (the default of
  // a seq_cst store) stalls every call on the peer's core taking the line
  // back; with light wakes the sleeper makes the heavy fence instead.
  me.phase.store(p, std::memory_order_release);
  light_fence(light_wakes_);
  if (me.sleepers.load(std::memory_order_relaxed) != 0) futex_wake_all(&me.phase);
}

void Segment::wait_all(uint32_t phase, const Deadline& deadline, const char* op) {
  for (int j = 0; j < size_; ++j)
    if (j != rank_) wait_for(j, phase, deadline, op);
}

void Segment::barrier(const Deadline& deadline, const char* op) {
  check_abort(op);
  raise_phase();
  wait_all(deadline, op);
  if (compare_pending_) compare_calls();
}

void Segment::post(const Call& call, std::string (*describe)(const Call&), const uint8_t* data, size_t bytes,
                   WriteMode how, const Deadline& deadline, const char* op) {
  check_abort(op);
  describe_ = describe;
  const uint64_t n = calls_;
  begin_[n % kCallRing] = phase_ + 1;
  // The root runs at most post_depth_ calls ahead: every rank must have
  // entered call n + 1 - post_depth_, having finished every call before
  // it, whoever rooted it. Since every post waits so, no rank is more than
  // kPostRing calls behind another, and the entries of this ring and of
  // the peers' call rings are rewritten only once read.
  const uint64_t depth = static_cast<uint64_t>(post_depth_);
  if (n + 1 >= depth) wait_all(begin_[(n + 1 - depth) % kCallRing], deadline, op);
  Call mismatched;
  std::string differ = reported_against_posts(&mismatched);
  // Every rank has finished call n - post_depth_. Where this rank posted
  // it, a peer that differed has reported it by now (checked above), but
  // a rank that posted it too, believing itself the root, has not: that
  // is looked for here, in the other ranks' post rings (lines nobody else
  // writes while one root posts, so no transfer between cores).
  if (differ.empty() && n >= depth) {
    const uint64_t c = n - depth;
    if (c >= settled_ && posted_seq_[c % kPostRing] == c + 1) {
      if (another_posted(c)) differ = differences(c, &mismatched);
      settled_ = c + 1;
    }
  }
  if (!differ.empty()) fail_after_post(mismatched, differ, deadline, op);
  PostEntry& e = post_entry(base_, size_, rank_, n);
  if (bytes <= sizeof e.head) std::memcpy(e.head, data, bytes);
  else if (how == WriteMode::Streaming) copy_bytes_streaming(e.rest, data, bytes);  // ends with a fence
  else std::memcpy(e.rest, data, bytes);
  e.call = pack(call);
  e.seq.store(n + 1, std::memory_order_release);
  posted_seq_[n % kPostRing] = n + 1;
  raise_phase();
  compare_pending_ = false;
  ++calls_;
  posted_ = true;
  last_post_ = n;
}

const uint8_t* Segment::await_post(const Call& call, std::string (*describe)(const Call&), int root, size_t bytes,
                                   const Deadline& deadline, const char* op) {
  check_abort(op);
  if (posted_) catch_up(deadline, op);
  describe_ = describe;
  const uint64_t n = calls_;
  begin_[n % kCallRing] = phase_ + 1;
  CallEntry& mine = call_entry(base_, size_, rank_, n);
  mine.call = pack(call);
  mine.seq.store(n + 1, std::memory_order_release);
  raise_phase();
  // A root that runs ahead has posted this call already: its entry is then
  // the one line this call reads from another core. Else the root's phase
  // says when it has made its call.
  const PostEntry& e = post_entry(base_, size_, root, n);
  if (e.seq.load(std::memory_order_acquire) != n + 1) wait_for(root, phase_, deadline, op);
  if (e.seq.load(std::memory_order_acquire) != n + 1) {
    // The root did not post (or made another call): a barrier of every
    // rank, as for any call.
    wait_all(deadline, op);
    skipped_ = false;
    compare_pending_ = true;
    compare_calls();
    return nullptr;
  }
  ++calls_;
  skipped_ = size_ > 2;  // the other peers were not waited for
  if (!same(e.call, mine.call))
    refuse(n, call, "; rank " + std::to_string(global_ranks_[root]) + ": " + described(unpack(e.call)));
  return bytes <= sizeof e.head ? e.head : e.rest;
}

std::string Segment::waits_behind(int peer) const {
  std::string chain = "rank " + std::to_string(global_ranks_[peer]);
  std::vector<bool> named(static_cast<size_t>(size_), false);
  named[static_cast<size_t>(rank_)] = true;
  for (int j = peer; !named[static_cast<size_t>(j)];) {
    named[static_cast<size_t>(j)] = true;
    const uint64_t w = infos(base_, size_)[j].waiting.load(std::memory_order_relaxed);
    const int k = static_cast<int>(w >> 32) - 1;
    const uint32_t phase = static_cast<uint32_t>(w);
    // A link holds while k has not reached the phase j awaits: j may have
    // gone to sleep in an earlier wait and never woken (stopped there).
    if (k < 0 || k >= size_ || k == j || reached(lines(base_)[k].phase.load(std::memory_order_acquire), phase)) break;
    chain += ", which waits for rank " + std::to_string(global_ranks_[k]);
    j = k;
  }
  return chain;
}

void Segment::wait_for(int peer, uint32_t phase, const Deadline& deadline, const char* op) {
  RankLine& line = lines(base_)[peer];
  // A peer seen past this phase before needs no new read (a posting root
  // checks its ring's peers that way, and they it).
  uint32_t& seen = seen_[static_cast<size_t>(peer)];
  if (reached(seen, phase)) return;
  auto arrived = [&] {
    const uint32_t v = line.phase.load(std::memory_order_acquire);
    if (!reached(v, phase)) return false;
    seen = v;
    return true;
  };
  if (arrived()) return;
  if (spin_for_.count() > 0) {
    const auto now = Clock::now();
    deadline.at(now);
    const auto spin_until = now + spin_for_;
    for (;;) {
      for (int i = 0; i < 64; ++i) {  // about 2-4 us of pauses between clock reads
        if (arrived()) return;
        cpu_relax();
      }
      if (Clock::now() >= spin_until) break;
    }
  }
  for (int i = 0; i < kYields; ++i) {
    if (arrived()) return;
    sched_yield();
  }
  // Only a sleeping wait says whom it waits for: the fast paths write nothing.
  std::atomic<uint64_t>& waiting = infos(base_, size_)[rank_].waiting;
  waiting.store((static_cast<uint64_t>(peer + 1) << 32) | phase, std::memory_order_relaxed);
  // A wait that fails keeps saying whom it waited for: the segment is
  // aborted by then, and a peer that timed out at the same moment may still
  // be naming the chain of waits (a link holds only while its phase is not
  // reached, see waits_behind). Cleared, the chain ended at this rank, not
  // at the stopped one, in 1 of many runs under ASan.
  struct Done {
    std::atomic<uint64_t>& waiting;
    ~Done() {
      if (std::uncaught_exceptions() == 0) waiting.store(0, std::memory_order_relaxed);
    }
  } done{waiting};
  // Counted a sleeper for the whole of the sleeping wait, so that the heavy
  // fence that pairs with the peer's light one in raise_phase() is made once
  // per wait, not once per sleep slice (each interrupts the other cores).
  // Where it fails (a kernel that allowed the peer's registration but
  // forbids this call), a wake the peer missed costs at most kSleepSlice.
  line.sleepers.fetch_add(1, std::memory_order_seq_cst);
  struct Asleep {
    std::atomic<uint32_t>& sleepers;
    ~Asleep() { sleepers.fetch_sub(1, std::memory_order_seq_cst); }
  } asleep{line.sleepers};
  if (heavy_sleeps_) heavy_fence(FenceScope::Host);
  auto next_liveness = Clock::now() + kLivenessEvery;
  for (;;) {
    check_abort(op);
    auto now = Clock::now();
    if (now >= deadline.at(now)) {
      std::string msg = std::string(op) + " timed out on shared memory: rank " + std::to_string(global_ranks_[rank_]) +
                        " waited for " + waits_behind(peer) + " (slow, stopped, or not calling the same collective)";
      abort(static_cast<int>(Status::Timeout), msg);
      fail(Status::Timeout, msg);
    }
    if (now >= next_liveness) {
      next_liveness = now + kLivenessEvery;
      const RankInfo& info = infos(base_, size_)[peer];
      if (live_start_time(info.pid) != info.start_time) fail_peer_gone(peer, op);
    }
    uint32_t v = line.phase.load(std::memory_order_seq_cst);
    if (!reached(v, phase)) {
      auto left = std::chrono::duration_cast<Millis>(deadline.at() - now) + Millis(1);
      futex_wait(&line.phase, v, std::min(kSleepSlice, left));
    }
    if (arrived()) return;
  }
}

}  // namespace ddp::core::shm
