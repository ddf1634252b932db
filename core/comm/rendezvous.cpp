// c10d's TCPStore, hosted or connected to, and seen as a KeyStore.
#include "comm/rendezvous.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "comm/failure.h"
#include "common/error.h"
#include "launch/supervisor.h"

namespace ddp::core {

c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& addr, int port, int listen_fd,
                                              std::optional<int> num_workers, Millis timeout) {
  c10d::TCPStoreOptions so;
  so.isServer = true;
  so.numWorkers = num_workers;
  so.waitWorkers = false;
  so.timeout = timeout;
  int bound = port;
  if (listen_fd < 0) listen_fd = launch::listen_socket(addr, port, &bound);
  so.masterListenFd = listen_fd;
  so.port = static_cast<uint16_t>(bound);
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, so);
  } catch (const std::exception& e) {
    fail(Status::IO, "cannot host the rendezvous store on " + addr + ":" + std::to_string(bound) + ": " +
                       short_what(e));
  }
}

namespace {

// The sockets of this process connected to `port` on some host: a store
// client's (a server's accepted sockets have the clients' ports as peers).
std::set<int> sockets_connected_to(int port) {
  std::set<int> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return fds;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    struct stat st {};
    if (fd == dirfd(dir) || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    int peer_port = -1;
    if (peer.ss_family == AF_INET) peer_port = ntohs(reinterpret_cast<const sockaddr_in*>(&peer)->sin_port);
    if (peer.ss_family == AF_INET6) peer_port = ntohs(reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_port);
    if (peer_port == port) fds.insert(fd);
  }
  closedir(dir);
  return fds;
}

// c10d's client reads some answers with no bound: after a wait's own
// timeout it cancels the wait and reads the host's reply to that, and a
// check or a set's answer is read the same way. A host that is stopped
// (SIGSTOP, a debugger, a frozen VM), not gone, never replies, and its
// clients would wait forever, inside every rank's collective or setup. A
// receive timeout on the client's socket ends such a read with c10d's
// DistNetworkError ("Socket Timeout"); the connection is out of step after
// that, and whoever sees the error shuts it down (close_if_out_of_step).
// Returns the sockets it bounded.
std::vector<int> bound_reads(const std::set<int>& before, int port, Millis bound) {
  std::vector<int> bounded;
  if (bound <= Millis(0)) return bounded;
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(bound.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((bound.count() % 1000) * 1000);
  for (int fd : sockets_connected_to(port))
    if (!before.count(fd) && setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0) bounded.push_back(fd);
  return bounded;
}

// c10d's client, made on a thread of its own, and waited for at most
// `bound`: its constructor reads the host's answer to a first message with
// no bound, and a stopped host (SIGSTOP, a debugger) whose listening socket
// the kernel still completes connections on would hold it forever. A
// client that does not come in time is left to its thread, which frees it
// once the host answers or is gone. nullptr: none came in time.
c10::intrusive_ptr<c10d::TCPStore> make_client(const std::string& addr, const c10d::TCPStoreOptions& so,
                                               Millis bound) {
  struct Pending {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
  };
  auto pending = std::make_shared<Pending>();
  std::thread([pending, addr, so] {
    c10::intrusive_ptr<c10d::TCPStore> store;
    std::exception_ptr error;
    try {
      store = c10::make_intrusive<c10d::TCPStore>(addr, so);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(pending->m);
    pending->store = std::move(store);
    pending->error = error;
    pending->done = true;
    pending->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(pending->m);
  if (!pending->cv.wait_for(lock, bound, [&] { return pending->done; })) return nullptr;
  if (pending->error) std::rethrow_exception(pending->error);
  return std::move(pending->store);
}

// The clients whose reads are bounded, with their sockets, so that one
// whose read timed out can be shut down (close_if_out_of_step). Weak: a
// client that is gone no longer owns its descriptors, which may be reused.
struct BoundedClient {
  c10::weak_intrusive_ptr<c10d::TCPStore> store;
  std::vector<int> fds;
};
// Never destroyed: a store monitor's watcher, a detached thread, may reach
// close_if_out_of_step while the process exits.
std::mutex& g_bounded_mutex = *new std::mutex;
std::vector<BoundedClient>& g_bounded = *new std::vector<BoundedClient>;

void remember_bounded(const c10::intrusive_ptr<c10d::TCPStore>& store, std::vector<int> fds) {
  std::lock_guard<std::mutex> lock(g_bounded_mutex);
  g_bounded.erase(std::remove_if(g_bounded.begin(), g_bounded.end(),
                                 [](const BoundedClient& b) { return b.store.expired(); }),
                  g_bounded.end());
  g_bounded.push_back({c10::weak_intrusive_ptr<c10d::TCPStore>(store), std::move(fds)});
}

}  // namespace

void close_if_out_of_step(c10d::Store& store, const std::exception& e) {
  if (read_timed_out(e)) shut_down_connection(store);
}

void shut_down_connection(c10d::Store& store) {
  c10d::Store* client = &store;
  if (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(&store)) client = prefixed->getUnderlyingNonPrefixStore().get();
  std::lock_guard<std::mutex> lock(g_bounded_mutex);
  for (const BoundedClient& b : g_bounded) {
    auto alive = b.store.lock();  // held while its descriptors are shut down: they are still its own
    if (alive && alive.get() == client)
      for (int fd : b.fds) shutdown(fd, SHUT_RDWR);
  }
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const std::string& addr, int port, Millis timeout,
                                                 const std::string& who, const std::string& host,
                                                 std::optional<Millis> read_bound) {
  const std::set<int> before = sockets_connected_to(port);
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(port);
  so.isServer = false;
  so.waitWorkers = false;
  so.timeout = timeout;
  std::string where = addr + ":" + std::to_string(port);
  try {
    // c10d retries the connection until `timeout` and says so when nobody
    // listens: its error, not ours, for a host that is not there.
    auto store = make_client(addr, so, timeout + Millis(250));
    if (!store)
      fail(Status::Timeout, who + ": the rendezvous store at " + where +
                                " took the connection but did not answer within " + std::to_string(timeout.count()) +
                                " ms; is " + host + " stopped?");
    remember_bounded(store, bound_reads(before, port, read_bound.value_or(timeout)));
    return store;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = short_what(e);
    Status s = classify_exception(e);
    if (s == Status::Timeout || s == Status::PeerFailed)
      fail(Status::Timeout, who + " could not reach the rendezvous store at " + where + " within " +
                              std::to_string(timeout.count()) + " ms; is " + host +
                              " running, and are that address and port right? (" + what + ")");
    fail(s == Status::Backend ? Status::IO : s, "rendezvous store at " + where + ": " + what);
  }
}

namespace {

// c10d's store calls, with what they throw classified once.
class C10dKeys : public KeyStore {
 public:
  explicit C10dKeys(c10::intrusive_ptr<c10d::Store> s) : s_(std::move(s)) {}
  void set(const std::string& key, const Bytes& value) override {
    guarded([&] { s_->set(key, value); });
  }
  Bytes get(const std::string& key) override {
    return guarded([&] { return s_->get(key); });
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return guarded([&] { return s_->add(key, delta); });
  }
  bool check(const std::vector<std::string>& keys) override {
    return guarded([&] { return s_->check(keys); });
  }
  void wait(const std::vector<std::string>& keys, Millis timeout) override {
    guarded([&] { s_->wait(keys, timeout); });
  }
  Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return guarded([&] { return s_->compareSet(key, expected, desired); });
  }

 private:
  template <typename F>
  auto guarded(F f) -> decltype(f()) {
    try {
      return f();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      close_if_out_of_step(*s_, e);
      fail(classify_exception(e), short_what(e));
    }
  }
  c10::intrusive_ptr<c10d::Store> s_;
};

}  // namespace

std::shared_ptr<KeyStore> keys_of(c10::intrusive_ptr<c10d::Store> store) {
  return std::make_shared<C10dKeys>(std::move(store));
}

}  // namespace ddp::core
