#include "comm/gloo_guard.h"

#include <cxxabi.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <mutex>

namespace ddp::core {
namespace {

std::terminate_handler g_previous = nullptr;
std::atomic<uint64_t> g_failures{0};
std::mutex g_message_mutex;
std::string* g_message = new std::string();  // never destroyed: read at any time

bool is_gloo_exception() {
  std::type_info* t = abi::__cxa_current_exception_type();
  return t && std::strncmp(t->name(), "N4gloo", 6) == 0;
}

void on_terminate() {
  if (is_gloo_exception()) {
    std::string what = "a Gloo transport thread failed";
    try {
      throw;
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    {
      std::lock_guard<std::mutex> lock(g_message_mutex);
      *g_message = what;
    }
    g_failures.fetch_add(1);
    // This thread belongs to a backend that is now broken: it never runs
    // again (the reaper does not destroy such a backend's threads either).
    for (;;) pause();
  }
  if (g_previous) g_previous();
  std::abort();
}

}  // namespace

void install_gloo_guard() {
  static std::once_flag once;
  std::call_once(once, [] { g_previous = std::set_terminate(on_terminate); });
}

uint64_t gloo_failures() { return g_failures.load(); }

std::string last_gloo_failure() {
  std::lock_guard<std::mutex> lock(g_message_mutex);
  return *g_message;
}

}  // namespace ddp::core