// One shared-memory segment for the ranks of a group that share a host: a
// control block (per rank: one cache line with its phase counter, calls
// and small payloads, a line with its pid and whom a sleeping wait of it
// waits for, a post ring for the broadcasts it roots, a line for its
// mismatch report, a ring of the broadcast calls it awaited; an abort
// word) followed by two data halves per rank
// (one where the segment is plain memory: a shared bucket).
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

#include "comm/shm/write_mode.h"

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
  // How a segment is laid out and waits; every rank of the host passes the same.
  struct Options {
    size_t slot_bytes = 0;
    // How long a wait spins before it sleeps; none: the default (see spin_for_).
    std::optional<Nanos> spin;
    // 2, or 1 for a segment used as plain memory (a shared bucket), which
    // has only half 0.
    int halves = 2;
    // Whether ranks may read each other's memory (cma()) where the host
    // allows it; false keeps every byte in the slots.
    bool reads = true;
    // Whether this rank's barriers may skip the full fence before they look
    // for sleeping peers (Segment::raise_phase), where the host offers the
    // heavy fence (open()).
    bool light_wakes = true;
  };
  // Every rank of the host calls this with the same store (prefixed for this
  // segment), local rank and size. Returns nullptr and sets *why_not when
  // some rank could not map the segment (another host, a /proc that hides
  // other processes): the caller then uses the network for everything.
  // Throws Status::Timeout when a rank does not arrive within `timeout`.
  // `global_ranks[i]` is local rank i's rank in the group (for messages).
  static std::unique_ptr<Segment> open(c10d::Store& store, int local_rank, const std::vector<int>& global_ranks,
                                       const Options& options, Millis timeout, std::string* why_not);
  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether every rank may read and write its peers' memory directly
  // (Linux's process_vm_readv and process_vm_writev, checked at open): one
  // copy where the slots take two.
  bool cma() const { return cma_; }
  // Whether some rank of the host may use fewer cores than the host has
  // ranks (agreed at open): waits there may need the scheduler, so the
  // collectives take the paths with fewer barriers.
  bool crowded() const { return crowded_; }
  // Copies `bytes` at address `from` of local rank `peer`'s process into
  // `to`, which the peer must keep unchanged until a barrier after this.
  // A failure aborts the segment: Status::PeerFailed where the peer has
  // exited, else Status::Backend naming the error.
  void read_from(int peer, void* to, uintptr_t from, size_t bytes, const char* op);
  // The other way (Linux's process_vm_writev): `bytes` from `from` into
  // address `to` of local rank `peer`'s process in the peer's write window
  // `window` (open_for_writes), which it keeps open until a barrier after
  // this. Returns false, writing nothing, where the peer closed it (its
  // call failed and returned). Fails as read_from does.
  bool write_to(int peer, uint64_t window, uintptr_t to, const void* from, size_t bytes, const char* op);
  // A rank whose memory peers may write into (write_to) in a call opens a
  // window for them first, numbered alike on every rank. A call that fails
  // closes it before it returns: a write already in progress is waited for
  // (until it ends, its writer, local rank `writer`, dies, or kWriteEndWait
  // passes), so that nothing lands in memory the caller has taken back.
  void open_for_writes(uint64_t window);
  void close_for_writes(uint64_t window, int writer);
  static constexpr std::chrono::seconds kWriteEndWait{10};
  // Two words local rank 0 writes for every rank to read, one per parity
  // of `call`, 0 in a new segment: how the collectives write their pieces
  // (write_mode.h says when each is written and read).
  uint64_t advice(uint64_t call) const;
  void set_advice(uint64_t call, uint64_t word);
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
  // A Call as the segment holds it (12 bytes; segment.cpp).
  struct PackedCall;
  // Where this rank posted its previous call (post()), announce() first
  // catches up with it: waits, within `deadline`, until every rank has
  // reached it, and compares the ranks' calls of it and the peers' reports
  // on the posts before it. If one differed, this call is not run: every
  // rank's fails in its barrier (this one's names the posted call and the
  // others'), so that all stay in step. Where this rank's previous call
  // waited for its root alone (await_post()), it first waits until every
  // rank has entered that call.
  void announce(const Call& call, std::string (*describe)(const Call&), const Deadline& deadline, const char* op);

  // Raises this rank's phase and waits until every rank reached it. Throws
  // Status::Timeout at the deadline, Status::PeerFailed when a peer's
  // process is gone or another rank aborted the segment.
  void barrier(const Deadline& deadline, const char* op);

  // The root of a broadcast of at most kPostBytes (4 KiB: every entry
  // takes that much of each rank's part, but pages never written, as in a
  // shared bucket's segment, cost no memory): writes `call` and the
  // data into the next entry of its post ring and raises its phase without
  // waiting for the peers, which read the entry once they see that phase
  // (await_post()), as MPI's eager sends do. The root waits only when it
  // is post_depth_ calls ahead of what every rank has finished.
  // A peer that finds its call differing from a posted one fails at that
  // call and reports it on its own line; the root learns of it when it next
  // waits (a full ring, or its next call that is not posted: see
  // announce()), and that call then fails on every rank. The root also
  // compares every rank's call of its post post_depth_ calls back, which
  // finds a rank that posted the same call, believing itself the root.
  // `how`: whether the data past the entry's first line is written cached
  // or streamed past the caches (write_mode.h).
  static constexpr size_t kPostBytes = 4096;
  static constexpr int kPostRing = 32;
  void post(const Call& call, std::string (*describe)(const Call&), const uint8_t* data, size_t bytes, WriteMode how,
            const Deadline& deadline, const char* op);
  // How many calls ahead of what its peers have finished a posting root
  // may run: 1 to kPostRing. The default, three quarters of the ring,
  // leaves an entry unread for 8 calls before the root rewrites it (in a
  // ring of 8, rewriting the line a peer had just read cost 4 B on 2 ranks
  // 0.14 us against 0.12). Where the ranks outnumber the cores, a call
  // that finds the ring full waits for a scheduler round (5-13 us on a
  // 2-core EPYC VM), so the depth sets how often: 4 ranks, 4 B, p90 6-14
  // us at depths 4 and 8 (more than a tenth of the calls wait), 0.41-6.5
  // at 16, 0.42-0.58 at 24, 0.28-0.37 at 32; p50 0.30-0.51 at any depth.
  static constexpr int kPostDepth = kPostRing * 3 / 4;
  void set_post_depth(int calls) { post_depth_ = calls < 1 ? 1 : calls > kPostRing ? kPostRing : calls; }
  // A peer of a broadcast of `bytes` (at most kPostBytes and slot_bytes())
  // from `root`: announces `call` and waits for the root alone. Where the
  // root posted this call, returns its data (bytes long), without waiting
  // for the other peers, so that each peer takes the posts as it gets
  // the CPU (where the ranks outnumber the cores, a barrier of every rank
  // per call waits for the scheduler). Where it did not, completes this
  // call's barrier with every rank and returns null: the data is then in
  // the root's slot.
  const uint8_t* await_post(const Call& call, std::string (*describe)(const Call&), int root, size_t bytes,
                            const Deadline& deadline, const char* op);
  // How many calls each rank's call ring keeps (more than kPostRing: no
  // rank is more calls behind another, see post()). 32 bytes a call.
  static constexpr int kCallRing = 2 * kPostRing;

  // Marks the segment unusable for every rank: their waits end with
  // `status` (the root cause's, as a published failure) naming this rank and
  // `reason`. The first abort wins.
  void abort(int status, const std::string& reason);
  // Throws what waits throw once the segment is aborted; nothing before.
  void check_abort(const char* op);

 private:
  Segment() = default;
  void wait_for(int peer, uint32_t phase, const Deadline& deadline, const char* op);
  // "rank p", followed by the ranks p waits for in turn, as far as each
  // still waits for the next ("rank 0, which waits for rank 2"): where a
  // rank waited for its root alone, the root it times out on may itself be
  // waiting for the rank that is stopped.
  std::string waits_behind(int peer) const;
  [[noreturn]] void fail_peer_gone(int peer, const char* op);
  // read_from (write false) or write_to (true).
  void transfer(int peer, void* local, uintptr_t remote, size_t bytes, bool write, const char* op);
  void compare_calls();
  // Publishes this rank's call number n as differing from the others'
  // (a root that posted it reads it later) and throws CallMismatch.
  [[noreturn]] void refuse(uint64_t n, const Call& mine, const std::string& differ);
  void report(uint64_t n, const Call& mine);
  // A call as messages name it (describe_, or the no call of a rank whose
  // call failed after a post of its own).
  std::string described(const Call& c) const;
  // After await_post() waited for the root alone: waits until every rank
  // entered that call, before this rank rewrites what they may still read.
  void rejoin(const Deadline& deadline, const char* op);
  // Rank j's call number n: in its post ring where it posted that call,
  // in its call ring where it announced it there, else in its line (by
  // parity).
  const PackedCall& call_of(int j, uint64_t n) const;
  // Whether a rank other than this one posted call number n.
  bool another_posted(uint64_t n) const;
  // Whether every rank's call number n is this rank's (no strings: the
  // common case of every call).
  bool same_calls(uint64_t n) const;
  // "; rank r: <its call>" for each rank whose call number n differs
  // from this rank's.
  std::string differences(uint64_t n, Call* mine) const;
  void catch_up(const Deadline& deadline, const char* op);
  // A peer's report of a call it found differing from a post of this rank
  // not yet seen: "; rank r: <its call>", or "" when there is none.
  // *posted: the first such post.
  std::string reported_against_posts(Call* posted) const;
  // This rank's call does not run because `posted` (a call it posted) did
  // not match `differ`: it announces no call, so that the peers' calls of
  // this number fail in their barrier too, and throws.
  [[noreturn]] void fail_after_post(const Call& posted, const std::string& differ, const Deadline& deadline,
                                    const char* op);
  void raise_phase();
  // Waits until every other rank reached `phase` (this rank's own, by default).
  void wait_all(const Deadline& deadline, const char* op) { wait_all(phase_, deadline, op); }
  void wait_all(uint32_t phase, const Deadline& deadline, const char* op);
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
  bool cma_ = false;
  bool crowded_ = false;
  bool light_wakes_ = false;   // raise_phase()'s fence is a compiler barrier (common/asymmetric_fence.h)
  bool heavy_sleeps_ = false;  // a wait about to sleep makes the heavy fence (some rank's wakes are light)
  uint64_t calls_ = 0;          // announced so far; its parity picks the rank line's call slot
  bool compare_pending_ = false;
  bool posted_ = false;  // the last call was a post(): its calls are compared at the next announce()
  uint64_t last_post_ = 0;      // the number of the last call this rank posted
  uint64_t settled_ = 0;        // this rank's posts before this call number are all compared
  int post_depth_ = kPostDepth;
  bool skipped_ = false;  // the last call waited for its root alone (await_post): see rejoin()
  // What this rank's post ring holds (each entry's seq), kept here too: a
  // peer's read of an entry may take the line from this core (the cores
  // hand lines that one writes and the other reads over whole), so reading
  // it back cost a transfer per post (a third of a 4-byte post on our EPYC VMs).
  uint64_t posted_seq_[kPostRing] = {};
  uint32_t begin_[kCallRing] = {};  // the phase call number n's first barrier raises, at n % kCallRing
  std::vector<uint32_t> seen_;  // each rank's phase as this rank last read it (phases only grow)
  std::string (*describe_)(const Call&) = nullptr;
  std::vector<int> global_ranks_;
};

}  // namespace ddp::core::shm
