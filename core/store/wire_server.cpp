#include "store/wire_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/error.h"
#include "common/kept_from_children.h"
#include "store/answer_queue.h"
#include "store/key_store.h"
#include "store/wire_protocol.h"

namespace ddp::core {
using namespace wire;

namespace {

struct Connection {
  int fd = -1;
  bool validated = false;
  std::vector<uint8_t> in;   // received, not yet parsed
  AnswerQueue out;           // answers not yet written
  size_t awaited = 0;        // keys of its wait still missing
  bool queued = false;       // `in` may hold queries its last turn left
  bool ended = false;        // the client closed its end: served what it sent, then dropped
  // What its last turn cost, in the order rounds serve the clients (run()).
  enum class Cost : uint8_t { Cheap, Unknown, Costly } cost = Cost::Unknown;
};

// What one connection is served in a turn of the loop before the others
// get theirs: queries until this much time has passed. A query may cost
// time in the store's size (a list of every key: 60 ms with 200k keys);
// 1000 of them in one kilobyte from one client held up every other client
// for 2.7 s, and fuzzing found a ping unanswered for 9 s.
constexpr std::chrono::microseconds kTurn{500};
// How long a round of turns runs before the costly clients left wait for
// the next round (see run()).
constexpr std::chrono::microseconds kRound{2000};

// What an emptied buffer may keep of its memory for the next query.
constexpr uint64_t kKeptBufferBytes = 64 * 1024;

enum class Parsed { Incomplete, Done, Bad };

}  // namespace

struct WireStoreServer::State {
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  int port = 0;
  std::thread thread;

  uint64_t next_id = 1;
  uint64_t last_costly = 0;  // the costly client served last: the next round goes on after it
  std::map<uint64_t, Connection> conns;
  std::unordered_map<std::string, Bytes> keys;
  std::unordered_map<std::string, std::vector<uint64_t>> waiting;  // key -> connections waiting for it
  struct Queue {
    std::deque<Bytes> items;
    uint64_t bytes = 0;
  };
  std::unordered_map<std::string, Queue> queues;  // apart from the keys, as in c10d
  // Until when the listening socket is left out of the poll: accept_new
  // found the process out of descriptors, and the socket stays readable,
  // so polling it again at once would spin on a core.
  std::chrono::steady_clock::time_point accept_paused_until{};
  uint64_t held = 0;  // keys, values and queued items, as counted by entry_bytes
  uint64_t max_held = kMaxStoreBytes;
  uint64_t buffered = 0;  // the memory every connection's in and out take (their capacity)
  uint64_t max_buffered = kMaxBufferedTotal;

  void run();
  void accept_new();
  bool read_from(Connection& c);
  bool write_to(Connection& c);
  Parsed handle_one(uint64_t id, Connection& c, Decoder& d);
  // Whether the store may take `adding` bytes more once `freeing` are gone.
  bool fits(uint64_t adding, uint64_t freeing = 0) const { return held - freeing + adding <= max_held; }
  // Sets `key`; false (nothing changed) where the store would hold more than max_held.
  [[nodiscard]] bool store(const std::string& key, Bytes value);
  void erase_key(std::unordered_map<std::string, Bytes>::iterator it);
  void wake(const std::string& key);
  void wake_one(const std::string& key);
  bool present(const std::string& key) const;
  size_t queue_length(const std::string& key) const;
  void forget_waits(uint64_t id);
  // Runs `change` on one of a connection's buffers and counts what its
  // memory grew or shrank by. An emptied input buffer gives its memory
  // back: a connection that once sent a 256 MiB value would keep it
  // otherwise (the answers give theirs back as they are written).
  static uint64_t memory_of(const std::vector<uint8_t>& in) { return in.capacity(); }
  static uint64_t memory_of(const AnswerQueue& out) { return out.memory(); }
  static void give_back_if_empty(std::vector<uint8_t>& in) {
    if (in.empty() && in.capacity() > kKeptBufferBytes) std::vector<uint8_t>().swap(in);
  }
  static void give_back_if_empty(AnswerQueue&) {}
  template <typename Buffer, typename F>
  void resize_buffer(Buffer& buffer, F&& change) {
    const uint64_t before = memory_of(buffer);
    change();
    give_back_if_empty(buffer);
    buffered = buffered - before + memory_of(buffer);
  }
  void send(Connection& c, Encoder& e) {
    resize_buffer(c.out, [&] { c.out.push(std::move(e.out())); });
  }
  // Whether an answer of `bytes` more fits what the connection may buffer,
  // and what every connection may. Checked before the answer is built: a
  // multi-get that lists one large key 65536 times asked for 64 GiB, and
  // the server ran out of memory building it (found by fuzzing).
  bool room_for(const Connection& c, uint64_t bytes) const {
    return bytes <= kMaxBufferedBytes && c.out.size() <= kMaxBufferedBytes - bytes && buffered <= max_buffered &&
           bytes <= max_buffered - buffered;
  }
  bool over_budget(const Connection& c) const {
    return c.in.size() > kMaxBufferedBytes || c.out.size() > kMaxBufferedBytes || buffered > max_buffered;
  }
  static uint64_t blob_bytes(size_t n) { return sizeof(uint64_t) + n; }
  static uint64_t entry_bytes(size_t key, size_t value) { return key + value + kEntryOverhead; }
};

namespace {

// The CPU time the calling thread has used; where the clock is missing,
// the time that passed (what a turn's cost was measured by before).
std::chrono::nanoseconds thread_cpu_time() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch());
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

bool set_flags(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0 && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0;
}

int port_of(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                  : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

bool read_keys(Decoder& d, std::vector<std::string>* keys) {
  uint64_t n = 0;
  if (!d.count(&n, kMaxKeysPerQuery)) return false;
  keys->resize(n);
  for (auto& k : *keys)
    if (!d.str(&k)) return false;
  return true;
}

}  // namespace

WireStoreServer::WireStoreServer(int listen_fd, uint64_t max_held, uint64_t max_buffered)
    : s_(std::make_unique<State>()) {
  s_->listen_fd = listen_fd;
  if (max_held) s_->max_held = max_held;
  if (max_buffered) s_->max_buffered = max_buffered;
  // The agent forks workers: neither the listening socket nor a connection
  // may leak into them, nor into a child the rank forks without exec (which
  // would keep the port taken for the next store on it).
  if (!set_flags(listen_fd) || pipe2(s_->stop_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close(listen_fd);
    fail(Status::IO, std::string("cannot set up the store's socket: ") + std::strerror(err));
  }
  drop_in_forked_children(listen_fd);
  s_->port = port_of(listen_fd);
  State* s = s_.get();
  s_->thread = std::thread([s] { s->run(); });
}

WireStoreServer::~WireStoreServer() {
  char b = 0;
  ssize_t w = write(s_->stop_pipe[1], &b, 1);
  (void)w;
  s_->thread.join();
  for (auto& [id, c] : s_->conns) close(c.fd);
  close(s_->listen_fd);
  close(s_->stop_pipe[0]);
  close(s_->stop_pipe[1]);
}

int WireStoreServer::port() const { return s_->port; }

void WireStoreServer::State::run() {
  std::vector<pollfd> fds;
  std::vector<uint64_t> ids;
  struct Candidate {  // a connection with queries to serve this round
    size_t i;         // its place in fds and ids
    uint64_t id;
    bool readable;
    Connection::Cost cost;
  };
  std::vector<Candidate> round;  // kept, as fds and ids are, so that a round allocates nothing
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const bool accepting = now >= accept_paused_until;
    fds.assign({{stop_pipe[0], POLLIN, 0}, {listen_fd, static_cast<short>(accepting ? POLLIN : 0), 0}});
    ids.assign(2, 0);
    bool queued = false;
    for (auto& [id, c] : conns) {
      const short in = c.ended ? 0 : POLLIN;  // an ended client's end stays readable
      fds.push_back({c.fd, static_cast<short>(in | (c.out.empty() ? 0 : POLLOUT)), 0});
      ids.push_back(id);
      queued = queued || c.queued;
    }
    // Queries left from a turn are served without waiting for new bytes.
    int wait_ms = -1;
    if (queued)
      wait_ms = 0;
    else if (!accepting)
      wait_ms = 1 + static_cast<int>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(accept_paused_until - now).count());
    if (poll(fds.data(), fds.size(), wait_ms) < 0) {
      if (errno == EINTR) continue;
      return;  // cannot happen with valid descriptors; the clients then see a closed store
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) accept_new();
    std::vector<uint64_t> dead;
    // Who is served in this round, and in what order: the clients whose
    // last turn was cheap (under kTurn) first, then the new ones, newest
    // first (a client that connects behind a burst of costly new ones is
    // not served after all of them: 128 such took 0.7 s), then the costly
    // ones in turn from where the last round left off. Once the round has
    // taken kRound and one client that is not cheap was served, those left
    // wait for the next round, which serves the cheap clients' new queries
    // first again. Serving every client each round let 64 clients sending
    // lists of 100k keys (about 20 ms each) hold up every other client for
    // 0.35-1.7 s: one list each before anyone else's turn. (Newest first
    // has its own price: while new connections arrive faster than one
    // costly first turn each, an older new client waits until they stop.)
    using Cost = Connection::Cost;
    round.clear();
    for (size_t i = 2; i < fds.size(); ++i) {
      auto it = conns.find(ids[i]);
      if (it == conns.end()) continue;
      const Connection& c = it->second;
      const bool readable = !c.ended && (fds[i].revents & (POLLIN | POLLHUP | POLLERR));
      if (readable || c.queued) round.push_back({i, ids[i], readable, c.cost});
    }
    const uint64_t after = last_costly;
    auto order = [after](const Candidate& x) {
      return std::make_tuple(x.cost, x.cost == Cost::Costly && x.id <= after, x.cost == Cost::Unknown ? ~x.id : x.id);
    };
    std::sort(round.begin(), round.end(), [&](const Candidate& a, const Candidate& b) { return order(a) < order(b); });
    const auto round_ends = std::chrono::steady_clock::now() + kRound;
    bool costly_served = false;  // or new
    for (const Candidate& x : round) {
      const bool costly = x.cost != Cost::Cheap;
      if (costly && costly_served && std::chrono::steady_clock::now() >= round_ends) continue;  // still readable or queued
      const size_t i = x.i;
      Connection& c = conns.find(x.id)->second;
      const bool readable = x.readable;
      if (costly) costly_served = true;
      if (x.cost == Cost::Costly) last_costly = x.id;
      // What a client sent before it closed is still served (a last set).
      bool open = true;
      size_t off = 0;
      const std::chrono::nanoseconds cpu_at_start = thread_cpu_time();
      try {
        if (readable) c.ended = !read_from(c);
        c.queued = false;
        const auto turn_ends = std::chrono::steady_clock::now() + kTurn;
        for (int served = 0;; ++served) {
          if (served > 0 && std::chrono::steady_clock::now() >= turn_ends) {
            c.queued = true;
            break;
          }
          Decoder d(c.in.data() + off, c.in.size() - off);
          Parsed p = handle_one(ids[i], c, d);
          if (p == Parsed::Bad) open = false;
          if (p != Parsed::Done) break;
          off += d.used();
        }
      } catch (const std::bad_alloc&) {
        // The host's memory is full (each value and buffer is bounded,
        // their number is not): this client loses its connection, where
        // the exception ended the process that hosts the store.
        open = false;
      }
      // Its cost is the loop's CPU time, not the time that passed: on a
      // loaded host a cheap add whose turn was preempted was taken for
      // costly, and its next query waited for every costly client in turn
      // (53 s behind 128 clients' key lists, under ASan beside two busy loops).
      c.cost = thread_cpu_time() - cpu_at_start >= kTurn ? Cost::Costly : Cost::Cheap;
      resize_buffer(c.in, [&] { c.in.erase(c.in.begin(), c.in.begin() + static_cast<std::ptrdiff_t>(off)); });
      if (over_budget(c)) open = false;
      if (c.ended && !c.queued) open = false;
      if (!open) {
        // What it sent is never parsed now; its memory goes at once, so
        // that the connections after it in this round are not measured
        // against it.
        resize_buffer(c.in, [&] { c.in.clear(); });
        dead.push_back(ids[i]);
      }
    }
    // Answers, and the wake-ups a query caused on other connections.
    for (auto& [id, c] : conns)
      if (!c.out.empty() && !write_to(c)) dead.push_back(id);
    for (uint64_t id : dead) {
      auto it = conns.find(id);
      if (it == conns.end()) continue;
      forget_waits(id);
      close(it->second.fd);
      buffered -= it->second.in.capacity() + it->second.out.memory();
      conns.erase(it);
      accept_paused_until = {};  // a descriptor is free again
    }
  }
}

void WireStoreServer::State::accept_new() {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors or memory: the connection waits in the backlog,
      // and is taken once a connection closes or 100 ms have passed.
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
        accept_paused_until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      return;  // else EAGAIN, or a connection that went away before it was taken
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    drop_in_forked_children(fd);  // a forked child holding it would hide this host's death from the client
    conns[next_id++].fd = fd;
  }
}

bool WireStoreServer::State::read_from(Connection& c) {
  uint8_t buf[65536];
  for (;;) {
    // A client that sends faster than its queries parse is read no further
    // than the bounds; the caller then drops it.
    if (over_budget(c)) return true;
    ssize_t n = recv(c.fd, buf, sizeof buf, 0);
    if (n > 0) {
      resize_buffer(c.in, [&] { c.in.insert(c.in.end(), buf, buf + n); });
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;  // closed by the client, or reset
  }
}

bool WireStoreServer::State::write_to(Connection& c) {
  bool ok = true;
  resize_buffer(c.out, [&] { ok = c.out.write_to(c.fd); });
  return ok;
}

bool WireStoreServer::State::store(const std::string& key, Bytes value) {
  auto it = keys.find(key);
  const uint64_t was = it == keys.end() ? 0 : entry_bytes(key.size(), it->second.size());
  const uint64_t now = entry_bytes(key.size(), value.size());
  if (!fits(now, was)) return false;
  held = held - was + now;
  if (it == keys.end())
    keys.emplace(key, std::move(value));
  else
    it->second = std::move(value);
  wake(key);
  return true;
}

void WireStoreServer::State::erase_key(std::unordered_map<std::string, Bytes>::iterator it) {
  held -= entry_bytes(it->first.size(), it->second.size());
  keys.erase(it);
}

void WireStoreServer::State::wake(const std::string& key) {
  auto it = waiting.find(key);
  if (it == waiting.end()) return;
  for (uint64_t id : it->second) {
    auto c = conns.find(id);
    if (c != conns.end() && c->second.awaited > 0 && --c->second.awaited == 0) {
      Encoder e;
      send(c->second, e.u8(kStopWaiting));
    }
  }
  waiting.erase(it);
}

// A queue's push ends at most one wait on it: the one item goes to one popper.
void WireStoreServer::State::wake_one(const std::string& key) {
  auto it = waiting.find(key);
  if (it == waiting.end()) return;
  auto& ids = it->second;
  for (auto w = ids.begin(); w != ids.end(); ++w) {
    auto c = conns.find(*w);
    if (c == conns.end() || c->second.awaited == 0) continue;
    if (--c->second.awaited == 0) {
      Encoder e;
      send(c->second, e.u8(kStopWaiting));
    }
    ids.erase(w);
    break;
  }
  if (ids.empty()) waiting.erase(it);
}

// What check and wait count as there: a key, or a queue with an item (c10d's rule).
bool WireStoreServer::State::present(const std::string& key) const {
  return keys.count(key) > 0 || queue_length(key) > 0;
}

size_t WireStoreServer::State::queue_length(const std::string& key) const {
  auto q = queues.find(key);
  return q == queues.end() ? 0 : q->second.items.size();
}

void WireStoreServer::State::forget_waits(uint64_t id) {
  for (auto it = waiting.begin(); it != waiting.end();) {
    auto& v = it->second;
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
    it = v.empty() ? waiting.erase(it) : std::next(it);
  }
  auto c = conns.find(id);
  if (c != conns.end()) c->second.awaited = 0;
}

// Parses one whole query before acting on it, so bytes that end early change
// nothing; then acts as c10d's own server does.
Parsed WireStoreServer::State::handle_one(uint64_t id, Connection& c, Decoder& d) {
  uint8_t type = 0;
  if (!d.u8(&type)) return Parsed::Incomplete;
  auto q = static_cast<Query>(type);
  if (!c.validated) {
    // Anything but the validation handshake is a foreign writer.
    uint32_t magic = 0;
    if (q != Query::Validate) return Parsed::Bad;
    if (!d.u32(&magic)) return Parsed::Incomplete;
    if (magic != kValidationMagic) return Parsed::Bad;
    c.validated = true;
    return Parsed::Done;
  }
  std::string key;
  Bytes value, desired;
  std::vector<std::string> ks;
  Encoder e;
  switch (q) {
    case Query::Ping: {
      uint32_t nonce = 0;
      if (!d.u32(&nonce)) break;
      send(c, e.u32(nonce));
      return Parsed::Done;
    }
    case Query::Set:
      if (!d.str(&key) || !d.blob(&value)) break;
      return store(key, std::move(value)) ? Parsed::Done : Parsed::Bad;
    case Query::CompareSet: {
      if (!d.str(&key) || !d.blob(&value) || !d.blob(&desired)) break;
      auto it = keys.find(key);
      if (it == keys.end()) {
        // As c10d: a missing key is created only when nothing was expected.
        if (!room_for(c, blob_bytes(value.empty() ? desired.size() : value.size()))) return Parsed::Bad;
        if (value.empty() && !store(key, desired)) return Parsed::Bad;
        send(c, e.blob(value.empty() ? desired : value));
      } else {
        if (!room_for(c, blob_bytes(std::max(it->second.size(), desired.size())))) return Parsed::Bad;
        if (it->second == value && !store(key, std::move(desired))) return Parsed::Bad;
        send(c, e.blob(keys[key]));
      }
      return Parsed::Done;
    }
    case Query::Get: {
      if (!d.str(&key)) break;
      auto it = keys.find(key);
      if (it == keys.end()) return Parsed::Bad;  // c10d's clients wait for a key before they get it
      if (!room_for(c, blob_bytes(it->second.size()))) return Parsed::Bad;
      send(c, e.blob(it->second));
      return Parsed::Done;
    }
    case Query::Add: {
      int64_t delta = 0;
      if (!d.str(&key) || !d.i64(&delta)) break;
      auto it = keys.find(key);
      if (it != keys.end()) {
        std::string was(it->second.begin(), it->second.end());
        char* end = nullptr;
        errno = 0;
        long long v = std::strtoll(was.c_str(), &end, 10);
        if (was.empty() || *end || errno) return Parsed::Bad;  // not a counter
        // Two's complement wrap: an overflowing add (anyone who reaches the
        // port can send one; found by fuzzing) must not be undefined.
        delta = static_cast<int64_t>(static_cast<uint64_t>(delta) + static_cast<uint64_t>(v));
      }
      std::string now = std::to_string(delta);
      if (!store(key, Bytes(now.begin(), now.end()))) return Parsed::Bad;
      send(c, e.i64(delta));
      return Parsed::Done;
    }
    case Query::Check: {
      if (!read_keys(d, &ks)) break;
      bool all = std::all_of(ks.begin(), ks.end(), [&](const std::string& k) { return present(k); });
      send(c, e.u8(all ? kCheckReady : kCheckNotReady));
      return Parsed::Done;
    }
    case Query::Wait: {
      if (!read_keys(d, &ks)) break;
      // c10d's clients wait for one thing at a time (a wait ends when
      // answered or canceled); a second wait before the first ended would
      // only grow the wait lists, without bound.
      if (c.awaited > 0) return Parsed::Bad;
      size_t missing = 0;
      for (const auto& k : ks)
        if (!present(k)) {
          waiting[k].push_back(id);
          ++missing;
        }
      c.awaited = missing;
      if (missing == 0) send(c, e.u8(kStopWaiting));
      return Parsed::Done;
    }
    case Query::CancelWait:
      forget_waits(id);
      send(c, e.u8(kWaitCanceled));
      return Parsed::Done;
    case Query::NumKeys:
      send(c, e.i64(static_cast<int64_t>(keys.size())));
      return Parsed::Done;
    case Query::DeleteKey: {
      if (!d.str(&key)) break;
      auto it = keys.find(key);
      const bool found = it != keys.end();
      if (found) erase_key(it);
      send(c, e.i64(found ? 1 : 0));
      return Parsed::Done;
    }
    case Query::Append: {
      if (!d.str(&key) || !d.blob(&value)) break;
      auto it = keys.find(key);
      const size_t had = it == keys.end() ? 0 : it->second.size();
      if (had + value.size() > kMaxValueBytes) return Parsed::Bad;
      const uint64_t adding = it == keys.end() ? entry_bytes(key.size(), value.size()) : value.size();
      if (!fits(adding)) return Parsed::Bad;
      held += adding;
      Bytes& v = keys[key];
      v.insert(v.end(), value.begin(), value.end());
      wake(key);
      return Parsed::Done;
    }
    case Query::MultiGet: {
      if (!read_keys(d, &ks)) break;
      uint64_t answer = 0;  // at most 2^16 keys of 2^28 bytes: no overflow
      for (const auto& k : ks) {
        auto it = keys.find(k);
        if (it == keys.end()) return Parsed::Bad;
        answer += blob_bytes(it->second.size());
      }
      if (!room_for(c, answer)) return Parsed::Bad;
      for (const auto& k : ks) e.blob(keys[k]);
      send(c, e);
      return Parsed::Done;
    }
    case Query::MultiSet: {
      uint64_t n = 0;
      if (!d.count(&n, kMaxKeysPerQuery)) break;
      std::vector<std::pair<std::string, Bytes>> kv(n);
      bool whole = true;
      for (auto& [k, v] : kv)
        if (!d.str(&k) || !d.blob(&v)) {
          whole = false;
          break;
        }
      if (!whole) break;
      // All or nothing: the entries' own sizes bound what they add, so
      // each store below fits where their sum does.
      uint64_t adding = 0;
      for (const auto& [k, v] : kv) adding += entry_bytes(k.size(), v.size());
      if (!fits(adding)) return Parsed::Bad;
      for (auto& [k, v] : kv)
        if (!store(k, std::move(v))) return Parsed::Bad;
      return Parsed::Done;
    }
    case Query::QueuePush: {
      if (!d.str(&key) || !d.blob(&value)) break;
      auto found = queues.find(key);
      const uint64_t queued_bytes = found == queues.end() ? 0 : found->second.bytes;
      // Bounded as one value is: a writer cannot grow a queue without end.
      if (queued_bytes + value.size() > kMaxValueBytes || queue_length(key) >= kMaxQueueItems) return Parsed::Bad;
      // An item costs an entry; a new queue, its key's entry too.
      const uint64_t adding = entry_bytes(0, value.size()) + (found == queues.end() ? entry_bytes(key.size(), 0) : 0);
      if (!fits(adding)) return Parsed::Bad;
      held += adding;
      Queue& q = queues[key];
      q.bytes += value.size();
      q.items.push_back(std::move(value));
      wake_one(key);
      return Parsed::Done;
    }
    case Query::QueuePop: {
      if (!d.str(&key)) break;
      size_t n = queue_length(key);
      e.i64(static_cast<int64_t>(n));  // the length before the pop; 0: nothing follows
      if (n > 0) {
        auto it = queues.find(key);
        Queue& q = it->second;
        if (!room_for(c, sizeof(int64_t) + blob_bytes(q.items.front().size()))) return Parsed::Bad;
        e.blob(q.items.front());
        q.bytes -= q.items.front().size();
        held -= entry_bytes(0, q.items.front().size());
        q.items.pop_front();
        if (q.items.empty()) {
          held -= entry_bytes(it->first.size(), 0);
          queues.erase(it);
        }
      }
      send(c, e);
      return Parsed::Done;
    }
    case Query::QueueLen: {
      if (!d.str(&key)) break;
      send(c, e.i64(static_cast<int64_t>(queue_length(key))));
      return Parsed::Done;
    }
    case Query::ListKeys: {
      uint64_t answer = sizeof(int64_t);
      for (const auto& kv : keys) answer += blob_bytes(kv.first.size());
      if (!room_for(c, answer)) return Parsed::Bad;
      e.i64(static_cast<int64_t>(keys.size()));
      for (const auto& [k, v] : keys) e.str(k);
      send(c, e);
      return Parsed::Done;
    }
    default:
      return Parsed::Bad;  // a query this server does not serve, or a foreign byte
  }
  return d.bad ? Parsed::Bad : Parsed::Incomplete;
}

}  // namespace ddp::core
