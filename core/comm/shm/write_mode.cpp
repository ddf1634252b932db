#include "comm/shm/write_mode.h"

namespace ddp::core::shm {
static_assert(kWriteClasses <= 8 * static_cast<int>(sizeof(WriteMask)), "a bit for each class");

int write_class(Tuned kind, size_t bytes) {
  int c = 0;
  for (size_t limit = size_t{16} << 10; bytes >= limit && c < kSizeClasses - 1; limit <<= 2) ++c;
  return static_cast<int>(kind) * kSizeClasses + c;
}

void WriteModeChooser::record(int c, WriteMode used, double ns_per_byte) {
  if (c < 0 || c >= kWriteClasses || !(ns_per_byte > 0)) return;
  Class& s = classes_[static_cast<size_t>(c)];
  const int u = static_cast<int>(used), o = 1 - u;
  // A mode's estimate follows its run of calls; one made after the other
  // mode ran (a try) starts afresh: the old one says how the machine was.
  const double level = s.since[u] == 0 ? s.estimate[u] : 0;
  bool changed = false;
  if (level > 0 && (ns_per_byte > kChange * level || ns_per_byte * kChange < level)) {
    // Off its mode's level: the machine changed if the next call says so
    // too (one call alone may have been preempted).
    if (++s.off_level >= 2) {
      s.estimate[u] = ns_per_byte;
      s.off_level = 0;
      changed = true;
    }
  } else {
    s.off_level = 0;
    s.estimate[u] = level > 0 ? (level + ns_per_byte) / 2 : ns_per_byte;
  }
  s.since[u] = 0;
  if (s.since[o] < UINT32_MAX) ++s.since[o];
  if (s.since_try < UINT32_MAX) ++s.since_try;
  // The faster as measured; one not measured yet is not faster.
  int best = u;
  if (s.estimate[o] > 0 && s.estimate[o] < s.estimate[u]) best = o;
  const int other = 1 - best;
  // Not right after publishing one: the call after that one was made the
  // way published before, and the try is still to come.
  const bool try_due = s.since_try >= 2 && (s.estimate[other] == 0 || s.since[other] >= kRetryEvery ||
                                            (changed && s.since_try >= kRetryGap));
  int publish = best;
  if (try_due && u != other) {  // a call made `other` is the try itself
    publish = other;
    s.since_try = 0;
  }
  const WriteMask bit = WriteMask{1} << c;
  mask_ = publish == static_cast<int>(WriteMode::Streaming) ? mask_ | bit : mask_ & ~bit;
}

}  // namespace ddp::core::shm
