#include "debug/flight_recorder.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace ddp::core::flight {
namespace {

constexpr uint64_t kDefaultEntries = 2048;
constexpr uint64_t kMaxEntries = uint64_t(1) << 20;

// One collective. Every field is an atomic so that a dump from another
// thread (or a signal handler) reads without a data race; `id` works as a
// sequence lock: 0 while the slot is rewritten, then the record's index + 1.
struct alignas(64) Slot {
  std::atomic<uint64_t> id{0};
  std::atomic<const char*> label{nullptr};
  std::atomic<int64_t> seq{0};
  std::atomic<const char*> op{nullptr}, reduce{nullptr}, dtype{nullptr};
  std::atomic<int64_t> numel{-1}, ndim{-1}, root{-1};
  std::atomic<int64_t> dims[kMaxDims]{};
  std::atomic<int64_t> state{0};
  std::atomic<uint64_t> t_enqueued{0}, t_waiting{0}, t_finished{0};  // cycle counter
};

Slot* g_ring = nullptr;  // set once by configure(), never freed (a dump may run at exit)
uint64_t g_mask = 0;
std::atomic<uint64_t> g_next{0};
std::atomic<int> g_rank{0}, g_world{1};
std::atomic<bool> g_dumping{false};
// The dumps' path up to the rank, as long as a path may be; empty where the
// one given is longer (no dump then: a cut one would land somewhere else).
char g_prefix[PATH_MAX];
char g_host[128];
// The cycle counter is turned into wall-clock time at dump time from two
// (counter, clock) pairs: the one taken at configure() and one at the dump.
uint64_t g_tick0 = 0;
int64_t g_real0_ns = 0, g_mono0_ns = 0;
std::once_flag g_once;

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
#endif
}

int64_t clock_ns(clockid_t c) {
  timespec ts;
  clock_gettime(c, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Slot* slot_of(Ticket t) {
  if (!t || !g_ring) return nullptr;
  Slot* s = &g_ring[(t - 1) & g_mask];
  return s->id.load(std::memory_order_relaxed) == t ? s : nullptr;
}

// --- an async-signal-safe text writer ---------------------------------------

struct Writer {
  explicit Writer(int f) : fd(f) {}
  int fd;
  bool ok = true;
  size_t n = 0;
  char buf[8192];
  void flush() {
    size_t off = 0;
    while (ok && off < n) {
      ssize_t w = ::write(fd, buf + off, n - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) ok = false;
      else off += size_t(w);
    }
    n = 0;
  }
  void put(char c) {
    if (n == sizeof(buf)) flush();
    buf[n++] = c;
  }
  void str(const char* s) {
    while (s && *s) put(*s++);
  }
  // One line: control characters become spaces.
  void line_of(const char* s) {
    for (; s && *s; ++s) put(static_cast<unsigned char>(*s) < 32 ? ' ' : *s);
  }
  void num(int64_t v) {
    char d[24];
    int k = 0;
    uint64_t u = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
    do {
      d[k++] = char('0' + u % 10);
      u /= 10;
    } while (u);
    if (v < 0) put('-');
    while (k) put(d[--k]);
  }
};

void handle_signal(int sig) {
  const char* what = sig == SIGUSR2 ? "signal SIGUSR2 (dump on request)"
                     : sig == SIGSEGV ? "fatal signal SIGSEGV"
                     : sig == SIGBUS  ? "fatal signal SIGBUS"
                     : sig == SIGFPE  ? "fatal signal SIGFPE"
                     : sig == SIGILL  ? "fatal signal SIGILL"
                                      : "fatal signal SIGABRT";
  int saved = errno;
  dump(what);
  errno = saved;
  if (sig == SIGUSR2) return;
  // Die the way the signal meant: the default action, raised again.
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_if_default(int sig) {
  struct sigaction cur {};
  if (sigaction(sig, nullptr, &cur) != 0 || cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)) return;
  struct sigaction sa {};
  sa.sa_handler = handle_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

void dump_at_exit() { dump("process exit (DDP_FLIGHT_RECORDER_DUMP_ON_EXIT)"); }

void configure_once() {
  const char* e = std::getenv("DDP_FLIGHT_RECORDER_ENTRIES");
  uint64_t want = kDefaultEntries;
  if (e && *e) {
    char* end = nullptr;
    long long v = std::strtoll(e, &end, 10);
    // A bad value is not worth failing a job for: the default stays.
    if (end && *end == '\0' && v >= 0) want = std::min<uint64_t>(uint64_t(v), kMaxEntries);
  }
  const char* f = std::getenv("DDP_FLIGHT_RECORDER_FILE");
  if (f && *f) {
    // Room for the rank and ".tmp" after it.
    if (std::strlen(f) + 24 <= sizeof(g_prefix)) {
      std::snprintf(g_prefix, sizeof(g_prefix), "%s", f);
    } else {
      std::fprintf(stderr, "libddp: DDP_FLIGHT_RECORDER_FILE is %zu bytes, more than a path may be (%d): "
                   "no flight record will be dumped\n", std::strlen(f), PATH_MAX);
    }
  } else {
    const char* tmp = std::getenv("TMPDIR");
    std::snprintf(g_prefix, sizeof(g_prefix), "%s/libddp_flight_rank_", tmp && *tmp ? tmp : "/tmp");
  }
  if (gethostname(g_host, sizeof(g_host) - 1) != 0) std::strcpy(g_host, "?");
  g_tick0 = ticks();
  g_real0_ns = clock_ns(CLOCK_REALTIME);
  g_mono0_ns = clock_ns(CLOCK_MONOTONIC);
  if (want == 0) return;
  uint64_t n = 1;
  while (n < want) n <<= 1;
  g_ring = new Slot[n];
  g_mask = n - 1;
  install_if_default(SIGUSR2);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) install_if_default(sig);
  const char* at_exit = std::getenv("DDP_FLIGHT_RECORDER_DUMP_ON_EXIT");
  if (at_exit && std::strcmp(at_exit, "1") == 0) std::atexit(dump_at_exit);
}

}  // namespace

const char* state_name(State s) {
  switch (s) {
    case State::Empty: return "empty";
    case State::Enqueued: return "enqueued";
    case State::Waiting: return "waiting";
    case State::Completed: return "completed";
    case State::Failed: return "failed";
    case State::TimedOut: return "timed_out";
    case State::Refused: return "refused";
  }
  return "?";
}

void configure(int global_rank, int world_size) {
  std::call_once(g_once, configure_once);
  g_rank.store(global_rank, std::memory_order_relaxed);
  g_world.store(world_size, std::memory_order_relaxed);
}

bool enabled() { return g_ring != nullptr; }

const char* intern_label(const std::string& label) {
  static std::mutex m;
  static auto* labels = new std::set<std::string>;  // never freed: entries point into it
  std::string clean = label;
  for (auto& c : clean)
    if (c == ' ' || static_cast<unsigned char>(c) < 32) c = '_';  // one field of a dump line
  std::lock_guard<std::mutex> lock(m);
  return labels->insert(clean).first->c_str();
}

Ticket record(const char* label, int64_t seq, const Call& c) {
  if (!g_ring) return 0;
  const uint64_t index = g_next.fetch_add(1, std::memory_order_relaxed);
  Slot& s = g_ring[index & g_mask];
  s.id.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.label.store(label, std::memory_order_relaxed);
  s.seq.store(seq, std::memory_order_relaxed);
  s.op.store(c.op, std::memory_order_relaxed);
  s.reduce.store(c.reduce, std::memory_order_relaxed);
  s.dtype.store(c.dtype, std::memory_order_relaxed);
  s.numel.store(c.numel, std::memory_order_relaxed);
  s.ndim.store(c.ndim, std::memory_order_relaxed);
  for (int d = 0; d < kMaxDims && d < c.ndim; ++d) s.dims[d].store(c.dims[d], std::memory_order_relaxed);
  s.root.store(c.root, std::memory_order_relaxed);
  s.state.store(int64_t(State::Enqueued), std::memory_order_relaxed);
  s.t_enqueued.store(ticks(), std::memory_order_relaxed);
  s.t_waiting.store(0, std::memory_order_relaxed);
  s.t_finished.store(0, std::memory_order_relaxed);
  s.id.store(index + 1, std::memory_order_release);
  return index + 1;
}

namespace {
void mark_waiting(Slot& s, uint64_t since) {
  if (s.t_waiting.load(std::memory_order_relaxed)) return;  // the first call only
  s.t_waiting.store(since, std::memory_order_relaxed);
  s.state.store(int64_t(State::Waiting), std::memory_order_relaxed);
}
}  // namespace

void waiting(Ticket t) {
  Slot* s = slot_of(t);
  if (s) mark_waiting(*s, ticks());
}

void waiting_since_enqueue(Ticket t) {
  Slot* s = slot_of(t);
  if (s) mark_waiting(*s, s->t_enqueued.load(std::memory_order_relaxed));
}

void finish(Ticket t, State st) {
  Slot* s = slot_of(t);
  if (!s) return;
  s->t_finished.store(ticks(), std::memory_order_relaxed);
  s->state.store(int64_t(st), std::memory_order_relaxed);
}

std::string dump_path() { return std::string(g_prefix) + std::to_string(g_rank.load()); }

bool dump(const char* reason) {
  if (!g_ring || !g_prefix[0]) return false;
  if (g_dumping.exchange(true)) return false;  // one dump at a time; the other's file stands
  char path[sizeof(g_prefix) + 24], tmp[sizeof(path) + 8];
  {
    // snprintf is not async-signal-safe: the rank is written by hand.
    Writer w(-1);
    w.str(g_prefix);
    w.num(g_rank.load(std::memory_order_relaxed));
    size_t len = std::min(w.n, sizeof(path) - 1);
    std::memcpy(path, w.buf, len);
    path[len] = '\0';
    std::memcpy(tmp, path, len);
    std::memcpy(tmp + len, ".tmp", 5);
  }
  // The default prefix is in /tmp, where anyone may have put a link under
  // this name: a plain open would follow it and overwrite the file it
  // leads to. So the name is cleared and made anew, never followed (where
  // another user's file holds it, no dump is written).
  ::unlink(tmp);
  int fd = ::open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    g_dumping.store(false);
    return false;
  }
  const uint64_t tick1 = ticks();
  const int64_t real1 = clock_ns(CLOCK_REALTIME), mono1 = clock_ns(CLOCK_MONOTONIC);
  const double ns_per_tick = tick1 > g_tick0 && mono1 > g_mono0_ns
                                 ? double(mono1 - g_mono0_ns) / double(tick1 - g_tick0)
                                 : 1.0;
  // Microseconds since the epoch; "-" for a time never taken.
  auto put_us = [](Writer& w, int64_t real_ns) {
    w.put(' ');
    w.num(real_ns / 1000);
  };
  auto ticks_ns = [&](uint64_t t) { return g_real0_ns + int64_t(double(int64_t(t - g_tick0)) * ns_per_tick); };
  auto put_ticks = [&](Writer& w, uint64_t t) {
    if (!t) return w.str(" -");
    put_us(w, ticks_ns(t));
  };
  // The three readings may come from different cores, whose cycle
  // counters can differ a little: the wait is clamped into [enqueued,
  // finished], so that a dump never shows a wait before its enqueue.
  auto put_waiting = [&](Writer& w, uint64_t t, uint64_t enqueued, uint64_t finished) {
    if (t && enqueued && t < enqueued) t = enqueued;
    if (t && finished && t > finished) t = finished;
    put_ticks(w, t);
  };
  Writer w(fd);
  w.str("libddp-flight-recorder 1\nrank ");
  w.num(g_rank.load());
  w.str("\nworld ");
  w.num(g_world.load());
  w.str("\npid ");
  w.num(getpid());
  w.str("\nhost ");
  w.line_of(g_host);
  w.str("\ndumped_us ");
  w.num(real1 / 1000);
  w.str("\nreason ");
  w.line_of(reason);
  w.str("\n# entry label seq op reduce dtype numel shape root state enqueued_us waiting_us finished_us\n");
  const uint64_t next = g_next.load(std::memory_order_acquire);
  const uint64_t first = next > g_mask + 1 ? next - (g_mask + 1) : 0;
  for (uint64_t i = first; i < next; ++i) {
    Slot& s = g_ring[i & g_mask];
    if (s.id.load(std::memory_order_acquire) != i + 1) continue;  // being rewritten
    const char* label = s.label.load(std::memory_order_relaxed);
    const char* reduce = s.reduce.load(std::memory_order_relaxed);
    const char* dtype = s.dtype.load(std::memory_order_relaxed);
    int64_t ndim = s.ndim.load(std::memory_order_relaxed);
    w.str("entry ");
    w.line_of(label ? label : "?");
    w.put(' ');
    w.num(s.seq.load(std::memory_order_relaxed));
    w.put(' ');
    w.str(s.op.load(std::memory_order_relaxed));
    w.put(' ');
    w.str(reduce ? reduce : "-");
    w.put(' ');
    w.str(dtype ? dtype : "-");
    w.put(' ');
    w.num(s.numel.load(std::memory_order_relaxed));
    w.put(' ');
    if (ndim < 0) {
      w.put('-');
    } else {
      w.put('[');
      for (int64_t d = 0; d < ndim && d < kMaxDims; ++d) {
        if (d) w.put(',');
        w.num(s.dims[d].load(std::memory_order_relaxed));
      }
      if (ndim > kMaxDims) w.str(",...");
      w.put(']');
    }
    w.put(' ');
    w.num(s.root.load(std::memory_order_relaxed));
    w.put(' ');
    w.str(state_name(State(s.state.load(std::memory_order_relaxed))));
    const uint64_t enqueued = s.t_enqueued.load(std::memory_order_relaxed);
    const uint64_t finished = s.t_finished.load(std::memory_order_relaxed);
    put_ticks(w, enqueued);
    put_waiting(w, s.t_waiting.load(std::memory_order_relaxed), enqueued, finished);
    put_ticks(w, finished);
    w.put('\n');
  }
  w.str("end\n");
  w.flush();
  bool ok = w.ok && ::close(fd) == 0 && ::rename(tmp, path) == 0;
  if (!ok) ::unlink(tmp);
  g_dumping.store(false);
  return ok;
}

double cycle_cost_ns(int iterations) {
  Call c;
  c.op = "all_reduce";
  c.reduce = "sum";
  c.dtype = "Float";
  c.numel = 1;
  c.ndim = 1;
  c.dims[0] = 1;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) {
    Ticket t = record("bench", i + 1, c);
    waiting_since_enqueue(t);  // as every direct (shm) collective records
    finish(t, State::Completed);
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / iterations;
}

}  // namespace ddp::core::flight
