// The store server's wire protocol (c10d TCPStore's), as ddprun's agent
// serves it to anyone who can reach its port: one server runs for the whole
// session; each input is sent on a fresh connection, whose end of writing is
// then closed, and whatever comes back is read for a few milliseconds. A
// foreign writer may lose its connection, never crash or wedge the server:
// after every input, a well-formed client must still be answered.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "launch/supervisor.h"
#include "store/wire_protocol.h"
#include "store/wire_server.h"

namespace {

using namespace ddp::core;

int g_port = 0;

// A connection to the server. Each input's connection is closed with a
// reset (SO_LINGER 0) so that tens of thousands of them leave no TIME_WAIT
// ports behind; a refused or unroutable connect is retried for a second
// (other tests on the machine use ports too) before it counts as the
// server gone.
int connect_local() {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(g_port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int attempt = 0;; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      linger l{1, 0};
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
      return fd;
    }
    if (attempt == 100) {
      std::perror("fuzz_store_wire: connecting to the server");
      std::abort();
    }
    if (fd >= 0) close(fd);
    usleep(10000);
  }
}

void send_all(int fd, const uint8_t* p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) return;  // the server dropped us: allowed
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Reads until the server closes or `ms` pass without a byte; returns the bytes.
std::vector<uint8_t> drain(int fd, int ms) {
  std::vector<uint8_t> got;
  uint8_t buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) break;
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r <= 0) break;
    got.insert(got.end(), buf, buf + r);
  }
  return got;
}

// A client that validates and pings must get its nonce back. A wedged
// server never answers; a busy machine (CI runs this beside other tests on
// 2 cores) once took over 5 s, so the wait is 9 s: still under libFuzzer's
// 10 s per-input timeout, so a wedge is a finding either way.
void check_alive() {
  int fd = connect_local();
  wire::Encoder e;
  e.query(wire::Query::Validate).u32(wire::kValidationMagic);
  e.query(wire::Query::Ping).u32(0x1234abcd);
  send_all(fd, e.out().data(), e.out().size());
  uint32_t nonce = 0;
  size_t have = 0;
  // A signal (libFuzzer's -timeout alarm) ends poll and recv early with
  // EINTR: that is no silence of the server's, so the wait goes on to its
  // deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(9);
  while (have < sizeof nonce) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      std::fprintf(stderr, "fuzz_store_wire: the server did not answer a ping within 9 s\n");
      std::abort();
    }
    ssize_t r = recv(fd, reinterpret_cast<uint8_t*>(&nonce) + have, sizeof nonce - have, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) std::abort();
    have += static_cast<size_t>(r);
  }
  if (nonce != 0x1234abcd) std::abort();
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static std::unique_ptr<WireStoreServer> server;
  int port = 0;
  int fd = launch::listen_socket("127.0.0.1", 0, &port);
  if (fd < 0) std::abort();
  server = std::make_unique<WireStoreServer>(fd);
  g_port = server->port();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = connect_local();
  // Most inputs are made to pass validation, so that the queries behind it
  // are reached; the first byte chooses.
  if (size > 0 && data[0] & 1) {
    wire::Encoder e;
    e.query(wire::Query::Validate).u32(wire::kValidationMagic);
    send_all(fd, e.out().data(), e.out().size());
  }
  if (size > 1) send_all(fd, data + 1, size - 1);
  shutdown(fd, SHUT_WR);
  drain(fd, 2);
  close(fd);
  static unsigned n = 0;
  if (++n % 64 == 0) check_alive();
  return 0;
}
