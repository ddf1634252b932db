// Status strings, the last error, dtype facts, version, byte buffers.
#include "ddp/common.h"
#include "ddp/version.h"

#include "handles.h"
#include "tensor/tensors.h"

#define DDP_STR2(x) #x
#define DDP_STR(x) DDP_STR2(x)

namespace ddp::capi {
const char* last_error();
void clear_last_error();
}  // namespace ddp::capi

using namespace ddp::capi;

extern "C" {

const char* ddp_status_string(ddp_status s) {
  switch (s) {
    case DDP_OK: return "ok";
    case DDP_E_INVALID_ARGUMENT: return "invalid argument";
    case DDP_E_STATE: return "invalid state";
    case DDP_E_TIMEOUT: return "timeout";
    case DDP_E_PEER_FAILED: return "peer failed";
    case DDP_E_BACKEND: return "backend error";
    case DDP_E_NOMEM: return "out of memory";
    case DDP_E_UNSUPPORTED: return "unsupported";
    case DDP_E_IO: return "i/o error";
    case DDP_E_INTERNAL: return "internal error";
    case DDP_E_WORKER_FAILED: return "worker failed";
    default: return "unknown status";
  }
}

const char* ddp_last_error_message(void) { return last_error(); }
void ddp_error_clear(void) { clear_last_error(); }
void ddp_error_set(const char* message) {
  if (message) set_last_error(message);
  else clear_last_error();
}

size_t ddp_dtype_size(ddp_dtype d) { return ddp::core::dtype_size(to_core(d)); }
const char* ddp_dtype_name(ddp_dtype d) { return ddp::core::dtype_name(to_core(d)); }

unsigned int ddp_version_number(void) { return DDP_VERSION_NUMBER; }
const char* ddp_version_string(void) {
  return DDP_STR(DDP_VERSION_MAJOR) "." DDP_STR(DDP_VERSION_MINOR) "." DDP_STR(DDP_VERSION_PATCH);
}

const void* ddp_buffer_data(const ddp_buffer* b) {
  auto* h = live(b); return h && !h->bytes.empty() ? h->bytes.data() : nullptr;
}
size_t ddp_buffer_size(const ddp_buffer* b) { auto* h = live(b); return h ? h->bytes.size() : 0; }
void ddp_buffer_free(ddp_buffer* b) { release(b); }

}  // extern "C"
