#include "comm/failure.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace ddp::core {
namespace {
bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}
}  // namespace

std::string short_what(const std::exception& e) {
  if (auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  std::string s = e.what();
  auto nl = s.find("\nException raised from");
  return nl == std::string::npos ? s : s.substr(0, nl);
}

bool read_timed_out(const std::exception& e) {
  return dynamic_cast<const c10::DistNetworkError*>(&e) && classify_exception(e) == Status::Timeout;
}

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  return dynamic_cast<const c10::Error*>(&e) && contains(short_what(e), "can't allocate memory");
}

void fail_from_aten(Status otherwise, const std::string& context, const std::exception& e) {
  const bool no_memory = is_out_of_memory(e);
  fail(no_memory ? Status::NoMemory : otherwise, context + (no_memory ? ": out of memory: " : ": ") + short_what(e));
}

Status classify_exception(const std::exception& e) {
  if (auto* de = dynamic_cast<const Error*>(&e)) return de->status();
  if (is_out_of_memory(e)) return Status::NoMemory;
  std::string msg = short_what(e);
  std::string lower(msg);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (contains(lower, "timed out") || contains(lower, "timeout")) return Status::Timeout;
  if (dynamic_cast<const c10::DistNetworkError*>(&e) || contains(lower, "connection") ||
      contains(lower, "broken pipe") || contains(lower, "closed by peer") ||
      contains(lower, "socket") || contains(lower, "read error") || contains(lower, "write error"))
    return Status::PeerFailed;
  return Status::Backend;
}

}  // namespace ddp::core