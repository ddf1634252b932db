// Built instead of nccl_backend.cpp when CUDA or NCCL headers are missing.
#include "comm/backend_factory.h"
#include "common/error.h"

namespace ddp {

bool nccl_compiled_in() { return false; }

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const BackendSpec&) {
  fail(DDP_E_UNSUPPORTED,
       "this libddp was built without NCCL (no CUDA/NCCL headers at build time); use backend \"gloo\"");
}

}  // namespace ddp
