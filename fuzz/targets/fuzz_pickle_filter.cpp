// The pickle of a torch.save file (data.pkl), as filter_pickle walks it
// before LibTorch's unpickler may see it: a checkpoint comes from anywhere.
// It returns the pickle to unpickle or throws ddp::core::Error (Status::IO);
// anything else, a crash, or a returned pickle that does not end in STOP is
// a finding.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "checkpoint/pickle_filter.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddp::core;
  std::string out;
  try {
    out = filter_pickle(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const Error& e) {
    if (e.status() != Status::IO) std::abort();
    return 0;
  }
  if (out.empty() || out.back() != '.') std::abort();
  return 0;
}
