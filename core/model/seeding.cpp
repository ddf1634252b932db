#include "model/seeding.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "common/error.h"
#include <ATen/detail/CUDAHooksInterface.h>

namespace ddp::core {
namespace {

constexpr int64_t kMaxSeed = 4294967295LL;  // numpy's bound, which Lightning checks

int64_t seed_from_env() {
  const char* v = std::getenv("PL_GLOBAL_SEED");
  if (!v) return 0;
  try {
    size_t used = 0;
    long long s = std::stoll(v, &used);
    if (used == std::string(v).size()) return s;
  } catch (const std::exception&) {
  }
  fail(Status::InvalidArgument, std::string("seed_everything: PL_GLOBAL_SEED='") + v + "' is not an integer");
}

}  // namespace

int64_t seed_everything(std::optional<int64_t> seed, bool workers) {
  const int64_t s = seed ? *seed : seed_from_env();
  check_arg(s >= 0 && s <= kMaxSeed, "seed_everything: " + std::to_string(s) + " is not in bounds, numpy accepts from 0 to " +
                                         std::to_string(kMaxSeed));
  ::setenv("PL_GLOBAL_SEED", std::to_string(s).c_str(), 1);
  // torch.manual_seed: the CPU generator, and every CUDA device's where
  // CUDA is loaded (the CUDA accelerator loads it at setup_environment).
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(static_cast<uint64_t>(s));
  }
  if (at::hasCUDA())
    for (int i = 0; i < at::detail::getCUDAHooks().getNumGPUs(); ++i) {
      auto gen = at::globalContext().defaultGenerator(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_current_seed(static_cast<uint64_t>(s));
    }
  ::setenv("PL_SEED_WORKERS", workers ? "1" : "0", 1);
  return s;
}

bool reset_seed() {
  if (!std::getenv("PL_GLOBAL_SEED")) return false;
  const char* w = std::getenv("PL_SEED_WORKERS");
  seed_everything(std::nullopt, w && std::string(w) == "1");
  return true;
}

void set_deterministic(bool on, bool warn_only) {
  auto& ctx = at::globalContext();
  ctx.setDeterministicAlgorithms(on, warn_only);
  ctx.setDeterministicCuDNN(on);
  if (on) ctx.setBenchmarkCuDNN(false);
  // cuBLAS is deterministic only with a fixed workspace (PyTorch's
  // reproducibility notes); Lightning sets this when deterministic.
  if (on) ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 0);
}

bool deterministic() { return at::globalContext().deterministicAlgorithms(); }

}  // namespace ddp::core

namespace ddp::core {

at::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

std::string cpu_rng_state_refusal(const at::Tensor& state) {
  at::Generator scratch = at::make_generator<at::CPUGeneratorImpl>();
  try {
    scratch.set_state(state);
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

void set_cpu_rng_state(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    fail(Status::InvalidArgument, std::string("a CPU random generator state that torch refuses: ") + e.what());
  }
}

}  // namespace ddp::core
