#include "store/wire_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/descriptor_limit.h"
#include "common/error.h"
#include "common/kept_from_children.h"
#include "store/wire_protocol.h"

namespace ddp::core {
using namespace wire;

namespace {

// c10d's clients prefix every key with "/"; so does this one, so both see
// the same keys on one server.
std::string on_wire(const std::string& key) { return "/" + key; }

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// One non-blocking connect attempt to one address; 0 or an errno.
int try_connect(const addrinfo* ai, std::chrono::steady_clock::time_point deadline, int* fd_out) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (fd < 0) return errno;
  int err = 0;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int r = poll(&p, 1, remaining_ms(deadline));
      socklen_t len = sizeof err;
      err = r <= 0 ? ETIMEDOUT : (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 ? err : errno);
    }
  }
  if (err) {
    close(fd);
    return err;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  drop_in_forked_children(fd);  // a forked child holding it would hide this rank's death from the store
  *fd_out = fd;
  return 0;
}

}  // namespace

WireStoreClient::WireStoreClient(const std::string& addr, int port, Millis timeout)
    : where_(addr + ":" + std::to_string(port)), timeout_ms_(timeout.count()) {
  auto deadline = Clock::now() + timeout;
  connect_until(deadline);
  Encoder hello;
  hello.query(Query::Validate).u32(kValidationMagic);
  uint32_t nonce = static_cast<uint32_t>(getpid());
  hello.query(Query::Ping).u32(nonce);
  uint32_t echo = 0;
  try {
    send_all(hello.out(), deadline, "the handshake");
    recv_or_fail(&echo, sizeof echo, deadline, "the handshake");
  } catch (...) {
    close(fd_);
    throw;
  }
  if (echo != nonce) {
    close(fd_);
    fail(Status::IO, "the store at " + where_ + " answered the handshake with a wrong nonce; is it a store?");
  }
}

WireStoreClient::~WireStoreClient() {
  if (fd_ >= 0) close(fd_);
}

void WireStoreClient::connect_until(Clock::time_point deadline) {
  auto colon = where_.rfind(':');
  std::string host = where_.substr(0, colon), port = where_.substr(colon + 1);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int last_err = 0;
  std::string last_what;
  for (;;) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
    if (gai == 0) {
      for (addrinfo* ai = res; ai; ai = ai->ai_next) {
        last_err = try_connect(ai, deadline, &fd_);
        if (last_err == 0) break;
      }
      freeaddrinfo(res);
      if (last_err == 0) return;
      last_what = std::strerror(last_err);
    } else {
      last_err = gai == EAI_SYSTEM ? errno : 0;
      last_what = gai_strerror(gai);  // a name that does not resolve yet may later (DNS of a starting pod)
    }
    // Out of descriptors: no retry mends that while this process keeps
    // them (it would wait the whole timeout to say "Too many open files").
    const std::string shortage = fd_shortage_text(last_err);
    if (!shortage.empty())
      fail(Status::IO, "could not open a connection to the store at " + where_ + ": " + std::strerror(last_err) + "; " +
                           shortage);
    if (Clock::now() >= deadline)
      fail(Status::Timeout, "could not reach the store at " + where_ + " within " + std::to_string(timeout().count()) +
                                " ms (" + last_what + ")");
    std::this_thread::sleep_for(std::min<Clock::duration>(std::chrono::milliseconds(50), deadline - Clock::now()));
  }
}

void WireStoreClient::broken(Status s, const std::string& why) {
  broken_ = true;
  broken_status_ = s;
  broken_why_ = why;
  fail(s, why);
}

void WireStoreClient::check_usable() const {
  if (broken_) fail(broken_status_, broken_why_ + " (earlier; the connection is unusable)");
}

void WireStoreClient::send_all(const std::vector<uint8_t>& bytes, Clock::time_point deadline, const char* what) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, remaining_ms(deadline)) == 0)
        broken(Status::Timeout, "the store at " + where_ + " took no data for " + what + " within " +
                                    std::to_string(timeout().count()) + " ms");
      continue;
    }
    broken(Status::PeerFailed, std::string("the store at ") + where_ + " went away during " + what + " (" +
                                   std::strerror(errno) + ")");
  }
}

bool WireStoreClient::recv_all(void* out, size_t n, Clock::time_point deadline, const char* what) {
  auto* p = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < n) {
    ssize_t r = recv(fd_, p + done, n - done, 0);
    if (r > 0) {
      done += static_cast<size_t>(r);
      continue;
    }
    if (r == 0)
      broken(Status::PeerFailed, shut_down_ ? std::string("this client shut its connection to the store at ") + where_ +
                                                  " down during " + what
                                            : std::string("the store at ") + where_ + " closed the connection during " + what);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      broken(Status::PeerFailed, std::string("the store at ") + where_ + " went away during " + what + " (" +
                                     std::strerror(errno) + ")");
    pollfd pf{fd_, POLLIN, 0};
    if (poll(&pf, 1, remaining_ms(deadline)) == 0) {
      if (done == 0) return false;
      broken(Status::Timeout, std::string("the store at ") + where_ + " stopped in the middle of its answer to " +
                                  what);
    }
  }
  return true;
}

void WireStoreClient::recv_or_fail(void* out, size_t n, Clock::time_point deadline, const char* what) {
  if (!recv_all(out, n, deadline, what))
    broken(Status::Timeout, std::string("the store at ") + where_ + " did not answer " + what + " within " +
                                std::to_string(timeout().count()) + " ms");
}

Bytes WireStoreClient::recv_blob(Clock::time_point deadline, const char* what) {
  uint64_t len = 0;
  recv_or_fail(&len, sizeof len, deadline, what);
  if (len > kMaxValueBytes)
    broken(Status::IO, "the store at " + where_ + " announced a value of " + std::to_string(len) + " bytes");
  Bytes b(len);
  if (len) recv_or_fail(b.data(), len, deadline, what);
  return b;
}

void WireStoreClient::set(const std::string& key, const Bytes& value) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  Encoder e;
  e.query(Query::Set).str(on_wire(key)).blob(value);
  send_all(e.out(), Clock::now() + timeout(), "a set");
}

Bytes WireStoreClient::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  wait_locked({key}, timeout());
  Encoder e;
  e.query(Query::Get).str(on_wire(key));
  auto deadline = Clock::now() + timeout();
  send_all(e.out(), deadline, "a get");
  return recv_blob(deadline, "a get");
}

int64_t WireStoreClient::ask_number(Encoder& query, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  auto deadline = Clock::now() + timeout();
  send_all(query.out(), deadline, what);
  int64_t v = 0;
  recv_or_fail(&v, sizeof v, deadline, what);
  return v;
}

int64_t WireStoreClient::add(const std::string& key, int64_t delta) {
  Encoder e;
  e.query(Query::Add).str(on_wire(key)).i64(delta);
  return ask_number(e, "an add");
}

bool WireStoreClient::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  Encoder e;
  e.query(Query::Check).u64(keys.size());
  for (const auto& k : keys) e.str(on_wire(k));
  auto deadline = Clock::now() + timeout();
  send_all(e.out(), deadline, "a check");
  uint8_t r = 0;
  recv_or_fail(&r, 1, deadline, "a check");
  if (r != kCheckReady && r != kCheckNotReady)
    broken(Status::IO, "the store at " + where_ + " answered a check with " + std::to_string(r));
  return r == kCheckReady;
}

void WireStoreClient::wait(const std::vector<std::string>& keys, Millis timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  wait_locked(keys, timeout);
}

// As c10d's client: WAIT, and when the keys do not come in time, CANCEL_WAIT
// and read up to its acknowledgement (a wake-up may cross it), so the
// connection stays in step and usable.
void WireStoreClient::wait_locked(const std::vector<std::string>& keys, Millis patience) {
  Encoder e;
  e.query(Query::Wait).u64(keys.size());
  for (const auto& k : keys) e.str(on_wire(k));
  send_all(e.out(), Clock::now() + timeout(), "a wait");
  uint8_t r = 0;
  if (recv_all(&r, 1, Clock::now() + patience, "a wait")) {
    if (r != kStopWaiting) broken(Status::IO, "the store at " + where_ + " answered a wait with " + std::to_string(r));
    return;
  }
  Encoder cancel;
  cancel.query(Query::CancelWait);
  auto deadline = Clock::now() + timeout();
  send_all(cancel.out(), deadline, "cancelling a wait");
  do recv_or_fail(&r, 1, deadline, "cancelling a wait");
  while (r == kStopWaiting);
  if (r != kWaitCanceled)
    broken(Status::IO, "the store at " + where_ + " answered a cancelled wait with " + std::to_string(r));
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
  fail(Status::Timeout, "waited " + std::to_string(patience.count()) + " ms for " + names + " at the store at " +
                            where_);
}

Bytes WireStoreClient::compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::lock_guard<std::mutex> lock(mu_);
  check_usable();
  Encoder e;
  e.query(Query::CompareSet).str(on_wire(key)).blob(expected).blob(desired);
  auto deadline = Clock::now() + timeout();
  send_all(e.out(), deadline, "a compare-and-set");
  return recv_blob(deadline, "a compare-and-set");
}

bool WireStoreClient::delete_key(const std::string& key) {
  Encoder e;
  e.query(Query::DeleteKey).str(on_wire(key));
  return ask_number(e, "a delete") > 0;
}

int64_t WireStoreClient::num_keys() {
  Encoder e;
  e.query(Query::NumKeys);
  return ask_number(e, "a key count");
}

void WireStoreClient::set_timeout(Millis timeout) {
  check_arg(timeout > Millis(0), "a store client's timeout must be positive, not " + std::to_string(timeout.count()) + " ms");
  timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
}

bool WireStoreClient::usable() {
  std::lock_guard<std::mutex> lock(mu_);
  return !broken_;
}

void WireStoreClient::shut_down() {
  shut_down_ = true;
  ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace ddp::core
