// One shared-memory segment for the ranks of a group that share a host: a
// control block (one cache line of phase counters per rank, an abort word)
// followed by two data halves per rank (one where the segment is plain
// memory: a shared bucket).
//
// The segment is an anonymous memfd: local rank 0 creates it, the others
// open it through /proc/<pid>/fd of rank 0, and once all have mapped it
// nobody holds a name for it. It can therefore never outlive the last rank
// that maps it, whatever killed them (no /dev/shm object to clean up).
//
// Synchronisation is by phases: every rank counts the phases it has reached
// in its own counter; a barrier raises it and waits until every peer's
// counter reached the same phase. Waiting spins briefly, then sleeps on a
// futex; a wait that passes its deadline, sees the abort word, or finds a
// peer process gone throws instead of waiting on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace c10d {
class Store;
}

namespace ddp::core::shm {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;
using Nanos = std::chrono::nanoseconds;

// The CPUs this process may run on (its affinity mask); 0 when unknown.
int cpus_available();

// A collective's deadline: `timeout` after its first wait that has to
// wait. Fixed then, from the clock read that wait makes anyway, so that a
// collective whose peers are already there reads no clock at all (a read
// costs about 20 ns on our KVM guests, a tenth of a 4-byte collective). One
// object serves all of a collective's waits: passed by reference.
class Deadline {
 public:
  explicit Deadline(Millis timeout) : timeout_(timeout) {}
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;
  // The deadline, fixed from `now` where nothing fixed it before.
  Clock::time_point at(Clock::time_point now) const {
    if (!fixed_) {
      at_ = now + timeout_;
      fixed_ = true;
    }
    return at_;
  }
  Clock::time_point at() const { return fixed_ ? at_ : at(Clock::now()); }

 private:
  Millis timeout_{0};
  mutable Clock::time_point at_{};
  mutable bool fixed_ = false;
};

class Segment {
 public:
  // Every rank of the host calls this with the same store (prefixed for this
  // segment), local rank and size. Returns nullptr and sets *why_not when
  // some rank could not map the segment (another host, a /proc that hides
  // other processes): the caller then uses the network for everything.
  // Throws Status::Timeout when a rank does not arrive within `timeout`.
  // `global_ranks[i]` is local rank i's rank in the group (for messages).
  // `spin`: how long a wait spins before it sleeps; none: the default (see
  // spin_for_).
  // `halves`: 2, or 1 for a segment used as plain memory (a shared bucket),
  // which has only half 0.
  static std::unique_ptr<Segment> open(c10d::Store& store, int local_rank, const std::vector<int>& global_ranks,
                                       size_t slot_bytes, std::optional<Nanos> spin, Millis timeout,
                                       std::string* why_not, int halves = 2);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Rank r's half h (0 or 1): slot_bytes() bytes, 64-byte aligned.
  uint8_t* slot(int r, int h) const;
  // Rank r's half h of a payload of at most kInlineBytes, in the cache line
  // that carries its phase: a peer's wait brings it over with the phase,
  // one transfer between cores instead of two.
  static constexpr size_t kInlineBytes = 16;
  uint8_t* inline_data(int r, int h) const;
  // Where rank r's half h of a piece of `bytes` bytes goes.
  uint8_t* slot_for(int r, int h, size_t bytes) const { return bytes <= kInlineBytes ? inline_data(r, h) : slot(r, h); }

  // What a rank is about to do. announce() publishes it; the next barrier
  // compares every rank's, and a mismatch (another collective, dtype, size
  // or root) is Status::InvalidArgument on every rank, before any data is
  // combined, with the segment still usable. `describe` names a call in
  // that message.
  // `what` 0 is no call: a rank that catches up with a posted call that
  // did not match announces it (the callers' kinds start at 1).
  static constexpr uint32_t kNoCall = 0;
  struct Call {
    uint32_t what = kNoCall;
    int32_t dtype = -1;
    int64_t count = 0;
  };
  // Where this rank posted its previous call (post()), announce() first
  // catches up with it: waits, within `deadline`, until every rank has
  // reached it and compares the ranks' calls. If they differed, this call
  // is not run: every rank's fails in its barrier (this one's names the
  // posted call and the others'), so that all stay in step.
  void announce(const Call& call, std::string (*describe)(const Call&), const Deadline& deadline, const char* op);

  // Raises this rank's phase and waits until every rank reached it. Throws
  // Status::Timeout at the deadline, Status::PeerFailed when a peer's
  // process is gone or another rank aborted the segment.
  void barrier(const Deadline& deadline, const char* op);

  // The root of a one-piece broadcast: raises this rank's phase without
  // waiting for the peers, which read what it wrote after their barrier of
  // this phase. It writes the half it writes only after every rank reached
  // its previous phase (announce() caught up), so a peer is done reading
  // the same half's last contents. The calls are compared at this rank's
  // next announce(): a broadcast whose peers made another call returns on
  // its root, which learns of it at its next call (see announce()).
  void post(const char* op);

  // Marks the segment unusable for every rank: their waits end with
  // `status` (the root cause's, as a published failure) naming this rank and
  // `reason`. The first abort wins.
  void abort(int status, const std::string& reason);

 private:
  Segment() = default;
  void wait_for(int peer, uint32_t phase, const Deadline& deadline, const char* op);
  [[noreturn]] void fail_peer_gone(int peer, const char* op);
  void check_abort(const char* op);
  void compare_calls();
  // Whether every rank's call of parity k is this rank's (no strings: the
  // common case of every call).
  bool same_calls(int k) const;
  // "; rank r: <its call>" for each rank whose call of parity k differs
  // from this rank's.
  std::string differences(int k, Call* mine) const;
  void catch_up(const Deadline& deadline, const char* op);
  void raise_phase();
  // Waits until every other rank reached this rank's phase.
  void wait_all(const Deadline& deadline, const char* op);
  std::string map(int fd, size_t bytes);
  std::string create(size_t bytes, uint64_t token, int* fd);
  std::string attach(const std::string& where, size_t bytes);

  struct Header;
  Header* header_ = nullptr;
  uint8_t* base_ = nullptr;
  size_t mapped_ = 0;
  size_t slot_bytes_ = 0;
  size_t halves_ = 2;
  int rank_ = 0;
  int size_ = 1;
  uint32_t phase_ = 0;
  // How long a wait spins before it yields and sleeps (open's `spin`, from
  // DDP_SHM_SPIN_US, overrides it; 0 with more ranks than cores). Waking a futex sleeper
  // costs about 20 us on our 2-core VMs, and a rank woken late makes its
  // peer sleep on the next barrier too: with a spin of a few microseconds a
  // 4-byte all-reduce locked into 19-24 us instead of 0.7-1.1 us. The spin
  // is what a waiting rank costs: at most this much CPU per wait, then
  // sleeps that wake every kSleepSlice.
  Nanos spin_for_ = std::chrono::microseconds(50);
  uint64_t calls_ = 0;          // announced so far; its parity picks the rank line's call slot
  bool compare_pending_ = false;
  bool posted_ = false;  // the last call was a post(): its calls are compared at the next announce()
  std::string (*describe_)(const Call&) = nullptr;
  std::vector<int> global_ranks_;
};

}  // namespace ddp::core::shm
