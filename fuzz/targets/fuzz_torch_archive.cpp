// A torch.save file's pickle, as read_torch_archive reads it: through the
// pickle filter, LibTorch's unpickler and the check that every tensor lies
// in its record. The input is data.pkl; the archive around it holds tensor
// records "0" to "3" of 0, 24, 64 and 256 bytes. A checkpoint comes from
// anywhere: read_torch_archive returns a value or throws ddp::core::Error;
// anything else, a crash, an allocation past the RSS limit, or a tensor
// whose bytes cannot all be read (ASan) is a finding.
#include <caffe2/serialize/inline_container.h>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "checkpoint/torch_archive.h"
#include "common/error.h"

namespace {

std::vector<uint8_t> archive(const uint8_t* pkl, size_t size) {
  std::vector<uint8_t> bytes;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return n;
  });
  const size_t sizes[] = {0, 24, 64, 256};
  for (size_t k = 0; k < 4; ++k) {
    std::vector<uint8_t> data(sizes[k], static_cast<uint8_t>(k + 1));
    w.writeRecord("data/" + std::to_string(k), data.data(), data.size());
  }
  w.writeRecord("data.pkl", pkl, size);
  w.writeEndOfFile();
  return bytes;
}

// Reads every byte every tensor reached from `root` may touch.
uint8_t touch(const c10::IValue& root) {
  uint8_t sum = 0;
  ddp::core::for_each_tensor(root, [&](const at::Tensor& t) {
    if (t.numel() == 0) return;
    int64_t last = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    const auto* base = static_cast<const uint8_t*>(t.storage().data());
    for (int64_t b = t.storage_offset() * t.element_size(); b < (last + 1) * int64_t(t.element_size()); ++b)
      sum ^= base[b];
  });
  return sum;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddp::core;
  try {
    volatile uint8_t sink = touch(read_torch_archive(bytes_source(archive(data, size)), "fuzz"));
    (void)sink;
  } catch (const Error&) {
  }
  return 0;
}
