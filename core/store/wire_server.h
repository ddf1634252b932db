// A store server that c10d's TCPStore clients can use (wire_protocol.h),
// without LibTorch: what ddprun's agent hosts for its own rendezvous and for
// its workers (TORCHELASTIC_USE_AGENT_STORE), so that the agent starts in
// milliseconds instead of loading LibTorch. One thread polls every
// connection; queries are parsed from buffered bytes, so a slow or foreign
// client holds up nobody, and a malformed one only loses its connection.
#pragma once

#include <cstdint>
#include <memory>

namespace ddp::core {

class WireStoreServer {
 public:
  // Serves on `listen_fd`, a socket bound and listening (launch::listen_socket);
  // the server owns it from now on. It holds at most `max_held` bytes of
  // keys, values and queued items (wire::kMaxStoreBytes), and its
  // connections' buffers take at most about `max_buffered` bytes together
  // (wire::kMaxBufferedTotal); 0 takes the default, tests pass less.
  explicit WireStoreServer(int listen_fd, uint64_t max_held = 0, uint64_t max_buffered = 0);
  ~WireStoreServer();  // stops serving and closes every connection
  WireStoreServer(const WireStoreServer&) = delete;
  WireStoreServer& operator=(const WireStoreServer&) = delete;

  int port() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace ddp::core
