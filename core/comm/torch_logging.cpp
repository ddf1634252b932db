#include "comm/torch_logging.h"

#include <c10/util/Logging.h>

#include <cstdlib>
#include <mutex>

namespace ddp::core {

void quiet_torch_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* chosen = std::getenv("TORCH_CPP_LOG_LEVEL");
    if (chosen && *chosen) return;
    FLAGS_caffe2_log_level = 3;  // c10's FATAL: errors and warnings are off
  });
}

}  // namespace ddp::core