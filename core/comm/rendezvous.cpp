// The job's store: c10d's TCPStore hosted, a BoundedStore connected to it,
// and either seen as a KeyStore.
#include "comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <exception>

#include "comm/failure.h"
#include "common/descriptor_limit.h"
#include "common/error.h"
#include "common/kept_from_children.h"
#include "launch/supervisor.h"

namespace ddp::core {

c10::intrusive_ptr<c10d::TCPStore> host_store(const std::string& addr, int port, int listen_fd,
                                              std::optional<int> num_workers, Millis timeout) {
  // Each rank keeps two connections to the store (its own and its group's
  // watcher; more for subgroups and the shm backend's Gloo), on top of what
  // this process needed for itself: at a soft limit that leaves no room
  // for them the ranks' connections waited unaccepted until their timeout.
  const rlim_t ranks = static_cast<rlim_t>(num_workers.value_or(1));
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
    raise_descriptor_limit(r.rlim_cur + 4 * ranks + 64);
  c10d::TCPStoreOptions so;
  so.isServer = true;
  so.numWorkers = num_workers;
  so.waitWorkers = false;
  so.timeout = timeout;
  int bound = port;
  if (listen_fd < 0) listen_fd = launch::listen_socket(addr, port, &bound);
  // A child this rank forks without exec would keep the port taken after
  // the store is gone, and a store set up on it again would find it in use.
  drop_in_forked_children(listen_fd);
  so.masterListenFd = listen_fd;
  so.port = static_cast<uint16_t>(bound);
  try {
    return c10::make_intrusive<c10d::TCPStore>(addr, so);
  } catch (const std::exception& e) {
    fail(Status::IO, "cannot host the rendezvous store on " + addr + ":" + std::to_string(bound) + ": " +
                       short_what(e));
  }
}

void shut_down_connection(c10d::Store& store) {
  c10d::Store* client = &store;
  if (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(&store)) client = prefixed->getUnderlyingNonPrefixStore().get();
  if (auto* bounded = dynamic_cast<BoundedStore*>(client)) bounded->shut_down();
}

c10::intrusive_ptr<BoundedStore> connect_store(const std::string& addr, int port, Millis timeout,
                                               const std::string& who, const std::string& host) {
  const std::string where = addr + ":" + std::to_string(port);
  try {
    return c10::make_intrusive<BoundedStore>(addr, port, timeout);
  } catch (const Error& e) {
    if (e.status() == Status::Timeout || e.status() == Status::PeerFailed)
      fail(Status::Timeout, who + " could not join the rendezvous store at " + where + " within " +
                              std::to_string(timeout.count()) + " ms; is " + host +
                              " running (and not stopped), and are that address and port right? (" + e.what() + ")");
    fail(e.status(), "rendezvous store at " + where + ": " + e.what());
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
