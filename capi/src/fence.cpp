#include "fence.h"

#include <new>

#include "comm/failure.h"
#include "common/error.h"

namespace ddp::capi {
namespace {
thread_local std::string t_last_error;
}

void set_last_error(const std::string& message) { t_last_error = message; }
const char* last_error() { return t_last_error.c_str(); }
void clear_last_error() { t_last_error.clear(); }

ddp_status store_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    set_last_error(e.what());
    return to_c(e.status());
  } catch (const std::bad_alloc&) {
    set_last_error("out of memory");
    return DDP_E_NOMEM;
  } catch (const std::exception& e) {
    // Not classified where it was thrown (an exception from LibTorch that
    // core let through): by its type, see classify_exception.
    set_last_error(short_what(e));
    return to_c(classify_exception(e));
  } catch (...) {
    set_last_error("unknown exception inside libddp");
    return DDP_E_INTERNAL;
  }
}

}  // namespace ddp::capi
