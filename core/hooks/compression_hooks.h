// PyTorch's default comm hooks beyond allreduce: fp16/bf16 compression,
// the fp16/bf16 wrappers around any other hook, and the no-op hook.
#pragma once

#include <ATen/core/ScalarType.h>

#include <memory>

#include "hooks/comm_hook.h"

namespace ddp::core {

// fp16_compress_hook / bf16_compress_hook: cast the bucket, divide by the
// group size, all-reduce SUM, cast back into the bucket.
std::shared_ptr<CommHook> make_compress_hook(at::ScalarType dtype);

// fp16_compress_wrapper / bf16_compress_wrapper: run `inner` on a compressed
// copy of the bucket and decompress its result into the bucket.
std::shared_ptr<CommHook> make_compress_wrapper(at::ScalarType dtype, std::shared_ptr<CommHook> inner);

// noop_hook: the bucket stays as it is (local gradients); for measuring
// everything but communication.
std::shared_ptr<CommHook> make_noop_hook();

}  // namespace ddp::core