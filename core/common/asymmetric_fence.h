// Asymmetric fences: a pair of a frequent side that must not stall and a
// rare side that may. The classic flag handshake ("I stored X, do you see
// Y?" against "I stored Y, do you see X?") needs a full fence between the
// store and the load on both sides; on x86 that is a locked instruction,
// which waits until every earlier store has reached the cache. After a
// store to a line a peer core is reading, that wait is a round trip to the
// peer's core: on our 2-core EPYC VMs it was a third of a 4-byte posted
// broadcast (0.10-0.11 us per call without it, 0.15-0.16 with it).
//
// With Linux's membarrier(2), the frequent side orders its store and load
// with a compiler barrier only, and the rare side makes every running
// thread of the registered processes pass a full fence. Either the rare
// side's load sees the frequent side's store, or the frequent side's load
// sees the rare side's store, as with two full fences.
#pragma once

#include <atomic>

namespace ddp::core {

enum class FenceScope {
  Process,  // the threads of this process
  Host,     // the processes of this host that registered for it
};

// Registers this process for the scope's rare side (once per process; the
// later calls return the first answer) and says whether this process's
// frequent side may use light_fence(true). False where the kernel lacks
// the command or forbids it: then both sides make full fences.
bool asymmetric_fences(FenceScope scope);

// The frequent side, between its store and its load. `asymmetric`: what
// asymmetric_fences() returned for the scope; false makes a full fence.
inline void light_fence(bool asymmetric) {
  if (asymmetric) std::atomic_signal_fence(std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The rare side, between its store and its load: pairs with the light
// fences of every registered process of the scope (and with full fences).
// A few microseconds and an interrupt to each core running such a process
// (16 us on our 2-core VMs with the other core busy): only for a path that
// is about to sleep anyway. Where membarrier fails it makes a full fence,
// which pairs only with full fences.
void heavy_fence(FenceScope scope);

}  // namespace ddp::core
