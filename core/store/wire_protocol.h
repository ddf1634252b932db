// c10d TCPStore's wire protocol, as torch 2.x's client speaks it (observed
// against the pinned wheel, see tests/store/): a connection opens with
// VALIDATE and a magic number, then PING with a nonce the server echoes.
// Each query is one type byte and its arguments; integers travel in host
// byte order (both ends are little-endian machines), strings and byte
// strings as a uint64 length and the bytes. A c10d client prefixes every
// key with "/". Every query of the pinned wheel's protocol is served, the
// queues and the key listing included.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ddp::core::wire {

constexpr uint32_t kValidationMagic = 0x3C85F7CE;

enum class Query : uint8_t {
  Validate = 0,
  Set = 1,
  CompareSet = 2,
  Get = 3,
  Add = 4,
  Check = 5,
  Wait = 6,
  NumKeys = 7,
  DeleteKey = 8,
  Append = 9,
  MultiGet = 10,
  MultiSet = 11,
  CancelWait = 12,
  Ping = 13,
  QueuePush = 14,
  QueuePop = 15,
  QueueLen = 16,
  ListKeys = 17,
};

constexpr uint8_t kCheckReady = 0, kCheckNotReady = 1;
constexpr uint8_t kStopWaiting = 0, kWaitCanceled = 1;

// The largest key, value and key count a server accepts: lengths are checked
// before anything is allocated, so a foreign writer cannot make it allocate
// what it announces.
constexpr uint64_t kMaxKeyBytes = 64 * 1024;
constexpr uint64_t kMaxValueBytes = 256ull * 1024 * 1024;
constexpr uint64_t kMaxKeysPerQuery = 1 << 16;
constexpr uint64_t kMaxQueueItems = 1 << 16;  // and a queue holds at most kMaxValueBytes
// What the store may hold in all, keys, values and queued items, each
// entry counted with kEntryOverhead for the tables' own memory. A write
// past it drops the writer's connection (as any refused query does), where
// a foreign writer could fill the host's memory until the kernel killed
// the process that hosts the store, and every rank's job with it.
constexpr uint64_t kMaxStoreBytes = 1ull << 30;
constexpr uint64_t kEntryOverhead = 64;
// What one connection may have buffered, either way: a query being received,
// or answers its client does not read. Past it the connection is dropped.
constexpr uint64_t kMaxBufferedBytes = kMaxValueBytes + (1u << 20);
// What every connection's buffers may take together (their allocated
// memory, which a growing buffer can make up to twice what it holds). Each
// connection's bound alone let 12 clients that each sent most of a 256 MiB
// set, and never the rest, make the store's host hold 3.1 GB; a few hundred
// would have ended it. The connection whose query or answer goes past it is
// dropped; 2 GiB leaves room for two largest queries at once.
constexpr uint64_t kMaxBufferedTotal = 2ull << 30;

// Appends the protocol's encodings to a byte buffer.
class Encoder {
 public:
  Encoder& u8(uint8_t v) { return raw(&v, 1); }
  Encoder& u32(uint32_t v) { return raw(&v, sizeof v); }
  Encoder& i64(int64_t v) { return raw(&v, sizeof v); }
  Encoder& u64(uint64_t v) { return raw(&v, sizeof v); }
  Encoder& bytes(const void* p, size_t n) { return u64(n).raw(p, n); }
  Encoder& str(const std::string& s) { return bytes(s.data(), s.size()); }
  Encoder& blob(const std::vector<uint8_t>& b) { return bytes(b.data(), b.size()); }
  Encoder& query(Query q) { return u8(static_cast<uint8_t>(q)); }
  std::vector<uint8_t>& out() { return out_; }

 private:
  Encoder& raw(const void* p, size_t n) {
    auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
    return *this;
  }
  std::vector<uint8_t> out_;
};

// Reads the protocol's encodings from bytes that may end early: each read
// returns false when the bytes so far do not hold it yet (the caller keeps
// them and retries with more), and `bad` is set when a length is over its
// bound (the caller drops the connection).
class Decoder {
 public:
  Decoder(const uint8_t* p, size_t n) : p_(p), n_(n) {}

  bool u8(uint8_t* v) { return raw(v, 1); }
  bool u32(uint32_t* v) { return raw(v, sizeof *v); }
  bool i64(int64_t* v) { return raw(v, sizeof *v); }
  bool u64(uint64_t* v) { return raw(v, sizeof *v); }
  bool count(uint64_t* v, uint64_t max) {
    if (!u64(v)) return false;
    if (*v > max) bad = true;
    return !bad;
  }
  bool str(std::string* s) { return sized(s, kMaxKeyBytes); }
  bool blob(std::vector<uint8_t>* b) { return sized(b, kMaxValueBytes); }
  size_t used() const { return at_; }

  bool bad = false;

 private:
  bool raw(void* v, size_t k) {
    if (n_ - at_ < k) return false;
    std::memcpy(v, p_ + at_, k);
    at_ += k;
    return true;
  }
  template <typename Out>
  bool sized(Out* out, uint64_t max) {
    uint64_t len = 0;
    if (!count(&len, max)) return false;
    if (n_ - at_ < len) return false;
    out->assign(p_ + at_, p_ + at_ + len);
    at_ += len;
    return true;
  }

  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

}  // namespace ddp::core::wire
