// How a rank writes the bytes its peers read next (a piece copied into its
// slot, a chunk's result): through its caches, or streamed past them to
// memory. Which is faster depends on where the host put the ranks' cores,
// and on a VM that changes while a job runs: 2 ranks on the 2-core AMD EPYC
// VM, 16 MiB all-reduce, p50 in ms, the two ways alternating within seconds:
//
//   the VM's state   cached   streaming
//   cores close       1.5-1.8   2.5-2.9    (a peer's line comes from a shared cache)
//   cores apart       7.0-8.6   1.5-2.1    (it crosses the fabric line by line;
//                                           from memory it streams)
//
// MPICH took 4.0-4.8 ms in both. So the collectives measure: local rank 0
// times each call of a size class in the way it was made, keeps choosing
// the faster, tries the other again when the one it uses changes speed (or
// every kRetryEvery calls of the class), and publishes its choice to the
// other ranks through the segment. A rank that writes the other
// way from its peers still gives the same result: only where the bytes
// wait differs.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ddp::core::shm {

enum class WriteMode : uint8_t { Cached = 0, Streaming = 1 };

// The calls that choose, each kind measured on its own.
enum class Tuned : int { SlotReduce = 0, SharedReduce, Broadcast, AllGather };
// Classes of calls, one bit each in a published mask: for each kind, sizes
// in powers of 4 from 16 KiB ([0, 16 KiB), [16, 64 KiB), ..., [64 MiB, ...)).
constexpr int kSizeClasses = 8;
constexpr int kWriteClasses = 4 * kSizeClasses;
int write_class(Tuned kind, size_t bytes);

// Local rank 0's choice reaches the others through two words in the
// segment, one per parity of the tuned calls' numbers, which every rank
// counts alike. After call k rank 0 writes the mask for call k + 2 into
// word (k + 2) % 2, which nobody reads until a rank starts call k + 2;
// by then rank 0 has certainly written it (before entering call k + 1),
// and it writes that word again only after call k + 2, which needs every
// rank. So every rank makes call k + 2 the same way, and rank 0 times
// calls made one way on every rank.
using WriteMask = uint32_t;
inline WriteMode mode_in(WriteMask mask, int c) { return (mask >> c) & 1 ? WriteMode::Streaming : WriteMode::Cached; }

class WriteModeChooser {
 public:
  // Tries the mode not in use after this many calls of its class, at most.
  static constexpr uint32_t kRetryEvery = 128;
  // Two calls in a row this much slower or faster than their mode's
  // estimate say the machine changed: the other mode is tried next (at
  // most once every kRetryGap calls of the class).
  static constexpr double kChange = 1.3;
  static constexpr uint32_t kRetryGap = 16;

  // A call of class c, made `used`, took `ns_per_byte` (from the moment
  // every rank had arrived).
  void record(int c, WriteMode used, double ns_per_byte);
  // Bit c: the mode for the next calls of class c, for publishing. The mode
  // measured faster, or the other one where it is due a try: then for one
  // call of the class, since record() of the next call of the class
  // (made the way published before) takes the try back.
  WriteMask mask() const { return mask_; }

 private:
  struct Class {
    double estimate[2] = {0, 0};  // ns per byte; 0: not measured
    uint32_t since[2] = {0, 0};   // calls of the class since each mode was last measured
    uint32_t since_try = kRetryGap;  // calls since a try was last published
    int off_level = 0;               // calls in a row off their mode's estimate
  };
  std::array<Class, kWriteClasses> classes_{};
  WriteMask mask_ = 0;
};

}  // namespace ddp::core::shm
