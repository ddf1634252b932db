// The Gloo backend (CPU collectives over TCP).
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "comm/backend_factory.h"
#include "comm/gloo_guard.h"
#include "common/error.h"
#include "common/kept_from_children.h"
#include "common/descriptor_limit.h"

namespace ddp::core {
namespace {

// The local address the kernel would use to reach `host` (no packet is sent:
// connect() on a UDP socket only picks a route). Peers reach us on the
// interface that faces rank 0, which is right for loopback jobs and for
// hosts with several interfaces alike.
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &res) != 0 || !res) return "";
  std::string out;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    char buf[INET_ADDRSTRLEN] = {0};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        inet_ntop(AF_INET, &local.sin_addr, buf, sizeof(buf))) {
      out = buf;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  return out;
}

std::shared_ptr<::gloo::transport::Device> pick_device(const std::string& master_addr) {
  // GLOO_SOCKET_IFNAME is honoured as torch.distributed does.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    std::string first(ifname);
    first = first.substr(0, first.find(','));
    return c10d::ProcessGroupGloo::createDeviceForInterface(first);
  }
  std::string local = local_address_towards(master_addr);
  if (!local.empty()) return c10d::ProcessGroupGloo::createDeviceForHostname(local);
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

}  // namespace

c10::intrusive_ptr<c10d::Backend> make_gloo_backend(const BackendSpec& spec) {
  if (spec.device.type != DeviceType::CPU)
    fail(Status::Unsupported, "the gloo backend in libddp runs on CPU tensors only; use nccl for CUDA");
  install_gloo_guard();
  // Gloo's full mesh takes a socket per other rank, a listener, its event
  // loop's epoll and wake-up pipe, and a socket for a moment while it looks
  // up the interface (size + 4 at the most, counted with strace on 4
  // ranks). A connection it cannot accept for want of a descriptor is an
  // exception on its event loop's thread, which stops there holding the
  // lock the connecting thread then waits for: that rank hangs for good,
  // and the others wait for it. So the room is checked first (with one to
  // spare) and its lack is an error. (Counted, not opened: opening them
  // all to see would take the room, for a moment, from the process's
  // other threads.)
  const size_t needed = static_cast<size_t>(spec.size) + 5;
  const std::string shortage = fd_shortage_for(needed);
  if (!shortage.empty())
    fail(Status::IO, "the Gloo backend of rank " + std::to_string(spec.rank) + " of " + std::to_string(spec.size) +
                         " needs about " + std::to_string(needed) +
                         " more file descriptors for its connections to the other ranks, and " + shortage);
  // The device (its listener and loop) and the full mesh, which it
  // connects before it returns (libddp's devices are made eager), are all
  // the descriptors Gloo opens: none goes to a program this rank starts.
  return kept_from_children([&] {
    auto options = c10d::ProcessGroupGloo::Options::create(spec.timeout);
    options->devices.push_back(pick_device(spec.master_addr));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(spec.store, spec.rank, spec.size, options);
  });
}

}  // namespace ddp::core