// c10d logs its own retries and failures to stderr, each with a multi-line
// C++ stack trace (a refused connection during rendezvous prints dozens of
// lines). libddp reports every failure through a status and its message, so
// that logging stays off unless the user asks for it.
#pragma once

namespace ddp::core {

// Raises LibTorch's C++ log threshold to FATAL, once per process, unless the
// user chose a level with TORCH_CPP_LOG_LEVEL (then that level stands).
// Called before libddp's first store or backend is made.
void quiet_torch_logging();

}  // namespace ddp::core