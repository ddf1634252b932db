// The flight recorder: every rank keeps its last N collectives in a fixed
// ring, on every backend (the entries are made where libddp starts and waits
// for a collective, above c10d), and writes them to a file when something
// goes wrong, so that a tool can say which rank fell behind and where the
// ranks first called different things (see flight_analysis.h).
//
// Plain C++ and POSIX, no LibTorch. Recording is a few relaxed atomic stores
// and two reads of the cycle counter (about 25 ns); writing a dump is async-signal-safe
// (no allocation, no locks), so that a fatal signal or SIGUSR2 can dump too.
//
// Environment (read once, when the first group of the process is made):
//   DDP_FLIGHT_RECORDER_ENTRIES  ring size, rounded up to a power of two
//                                (default 2048; 0 turns recording off)
//   DDP_FLIGHT_RECORDER_FILE     dump path prefix; the rank is appended
//                                (default ${TMPDIR:-/tmp}/libddp_flight_rank_)
//   DDP_FLIGHT_RECORDER_DUMP_ON_EXIT=1  also dump when the process exits
// Dumps happen on a timeout or a peer failure (the group breaks), on
// SIGUSR2, and on SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT; a signal handler is
// installed only where the signal's disposition is still the default, so a
// JVM's or Python's own handlers are never replaced.
#pragma once

#include <cstdint>
#include <string>

namespace ddp::core::flight {

constexpr int kMaxDims = 6;

enum class State : int64_t { Empty = 0, Enqueued, Waiting, Completed, Failed, TimedOut, Refused };
const char* state_name(State s);

// What one collective was called with. The strings must be static (string
// literals, c10's dtype names): the ring keeps their pointers.
struct Call {
  const char* op = "?";
  const char* reduce = nullptr;  // nullptr: the op has none
  const char* dtype = nullptr;   // nullptr: no tensor (barrier, bytes)
  int64_t numel = -1;
  int ndim = -1;
  int64_t dims[kMaxDims] = {};
  int root = -1;
};

// Identifies one entry to update; 0 when nothing was recorded (recording is
// off). Cheap to copy.
using Ticket = uint64_t;

// Reads the environment and sets the rank the dump file is named after.
// Called by every group init; the first call fixes the settings.
void configure(int global_rank, int world_size);

bool enabled();

// A group's name in the record, the same on every rank, as a string that
// lives as long as the process (entries outlive their group). Call once per
// group: it takes a lock.
const char* intern_label(const std::string& label);

// `label` comes from intern_label(); `seq` counts that group's collectives
// from 1.
Ticket record(const char* label, int64_t seq, const Call& call);
// The caller began waiting (first call only): a third read of the cycle
// counter, for a collective started earlier (a c10d work).
void waiting(Ticket t);
// The same for a collective that waits from the moment it is recorded (the
// direct path: only argument checks lie between): its enqueue reading
// stands for the wait's too, well within the dump's microsecond, and
// recording costs the two reads of the cycle counter, not three (on our
// 2-core VM a read is 13 ns and a steady_clock reading 32 ns, against a
// 4-byte shm broadcast of about 0.25 us).
void waiting_since_enqueue(Ticket t);
void finish(Ticket t, State s);

// Writes every entry to <prefix><rank> (via a temporary file and rename):
// what dump-on-failure, the signal handlers and DUMP_ON_EXIT call. `reason`
// is one line. Returns false when recording is off or the write failed.
// Safe to call from a signal handler.
bool dump(const char* reason);
// The file dump() writes.
std::string dump_path();

// How long one record/waiting_since_enqueue/finish cycle takes, for the
// cost benchmark.
double cycle_cost_ns(int iterations);

}  // namespace ddp::core::flight
