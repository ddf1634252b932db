// The answers a store server has for one connection and has not written
// yet, kept in chunks: a large answer is its own chunk, moved in and never
// copied again; small ones are appended to the last chunk. One vector grown
// by doubling copied up to 128 MiB on a single append (a client asking for
// a large value many times and reading none), and moved every byte not yet
// written to the front after each write; a round of the server that did so
// held up every other client for it.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <deque>
#include <vector>

namespace ddp::core {

class AnswerQueue {
 public:
  bool empty() const { return bytes_ == 0; }
  uint64_t size() const { return bytes_; }      // bytes not yet written
  uint64_t memory() const { return memory_; }  // what the chunks hold allocated

  void push(std::vector<uint8_t>&& answer) {
    if (answer.empty()) return;
    bytes_ += answer.size();
    if (!chunks_.empty() && answer.size() < kSmall && chunks_.back().size() < kSmall) {
      auto& last = chunks_.back();
      memory_ -= last.capacity();
      last.insert(last.end(), answer.begin(), answer.end());
      memory_ += last.capacity();
      return;
    }
    memory_ += answer.capacity();
    chunks_.push_back(std::move(answer));
  }

  // Writes what `fd` takes without blocking; false where the connection failed.
  bool write_to(int fd) {
    while (!chunks_.empty()) {
      const auto& front = chunks_.front();
      ssize_t n = ::send(fd, front.data() + head_, front.size() - head_, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      head_ += static_cast<size_t>(n);
      bytes_ -= static_cast<uint64_t>(n);
      if (head_ == front.size()) {
        memory_ -= front.capacity();
        chunks_.pop_front();
        head_ = 0;
      }
    }
    return true;
  }

 private:
  static constexpr size_t kSmall = 64 * 1024;  // answers below it share a chunk
  std::deque<std::vector<uint8_t>> chunks_;
  size_t head_ = 0;  // bytes of the front chunk already written
  uint64_t bytes_ = 0, memory_ = 0;
};

}  // namespace ddp::core
