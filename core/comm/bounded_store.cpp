#include "comm/bounded_store.h"

#include <c10/util/Exception.h>

#include "common/error.h"
#include "store/wire_client.h"

namespace ddp::core {
namespace {

using Millis = std::chrono::milliseconds;

// c10d's kNoTimeout (zero) as a client's bound: a year, which no job waits.
Millis client_bound(Millis timeout) { return timeout == c10d::Store::kNoTimeout ? Millis(365LL * 24 * 3600 * 1000) : timeout; }

}  // namespace

BoundedStore::BoundedStore(const std::string& addr, int port, Millis timeout)
    : c10d::Store(timeout),
      addr_(addr),
      port_(port),
      client_(std::make_unique<WireStoreClient>(addr, port, client_bound(timeout))) {}

BoundedStore::~BoundedStore() = default;

// With the client's copy of the timeout (see wait()).
c10::intrusive_ptr<c10d::Store> BoundedStore::clone() {
  return c10::make_intrusive<BoundedStore>(addr_, port_, client_->timeout());
}

// The client's errors as c10d's (see the header). Every other exception
// (std::bad_alloc) passes as it is.
template <typename Call>
auto BoundedStore::translated(const char* what, const Call& call) -> decltype(call()) {
  try {
    return call();
  } catch (const Error& e) {
    if (e.status() == Status::Timeout && client_->usable())
      C10_THROW_ERROR(DistStoreError, std::string(what) + ": wait timeout: " + e.what());
    // comm/failure.h classifies by these words: a timed-out read is
    // Status::Timeout, anything else a lost peer.
    if (e.status() == Status::Timeout)
      C10_THROW_ERROR(DistNetworkError, std::string(what) + ": timed out: " + e.what());
    C10_THROW_ERROR(DistNetworkError, std::string(what) + ": " + e.what());
  }
}

void BoundedStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  translated("set", [&] { client_->set(key, value); });
}

std::vector<uint8_t> BoundedStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                              const std::vector<uint8_t>& desired) {
  return translated("compareSet", [&] { return client_->compare_set(key, expected, desired); });
}

std::vector<uint8_t> BoundedStore::get(const std::string& key) {
  return translated("get", [&] { return client_->get(key); });
}

int64_t BoundedStore::add(const std::string& key, int64_t value) {
  return translated("add", [&] { return client_->add(key, value); });
}

bool BoundedStore::deleteKey(const std::string& key) {
  return translated("deleteKey", [&] { return client_->delete_key(key); });
}

bool BoundedStore::check(const std::vector<std::string>& keys) {
  return translated("check", [&] { return client_->check(keys); });
}

int64_t BoundedStore::getNumKeys() {
  return translated("getNumKeys", [&] { return client_->num_keys(); });
}

// The client's copy of the timeout: setTimeout may change it from another
// thread, and c10d's timeout_ is a plain field.
void BoundedStore::wait(const std::vector<std::string>& keys) {
  translated("wait", [&] { client_->wait(keys, client_->timeout()); });
}

void BoundedStore::wait(const std::vector<std::string>& keys, const Millis& timeout) {
  translated("wait", [&] { client_->wait(keys, client_bound(timeout)); });
}

void BoundedStore::setTimeout(const Millis& timeout) {
  c10d::Store::setTimeout(timeout);
  client_->set_timeout(client_bound(timeout));
}

void BoundedStore::shut_down() { client_->shut_down(); }

}  // namespace ddp::core
