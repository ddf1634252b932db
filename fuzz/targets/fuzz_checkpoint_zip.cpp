// Checkpoint files: the zip container's central directory (zip64 too), the
// first thing read from a checkpoint, whose CRC-32s every record is checked
// against (core/checkpoint/zip_directory.cpp). Input: the file's bytes.
// zip_record_crcs returns the records or throws ddp::core::Error.
#include <caffe2/serialize/read_adapter_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "checkpoint/zip_directory.h"
#include "common/error.h"

// Defined in LibTorch, which this target does not link.
caffe2::serialize::ReadAdapterInterface::~ReadAdapterInterface() = default;

namespace {
class Bytes : public caffe2::serialize::ReadAdapterInterface {
 public:
  Bytes(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  size_t size() const override { return n_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char*) const override {
    if (pos >= n_) return 0;
    size_t k = std::min<uint64_t>(n, n_ - pos);
    std::memcpy(buf, p_ + pos, k);
    return k;
  }

 private:
  const uint8_t* p_;
  size_t n_;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Bytes in(data, size);
  try {
    ddp::core::zip_record_crcs(in, "fuzz.ckpt");
  } catch (const ddp::core::Error&) {
  }
  return 0;
}
