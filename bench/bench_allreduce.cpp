// ddp_all_reduce through the C API vs raw c10d ProcessGroupGloo, in the same
// processes, alternating call by call so that both see the same machine state.
// One process per rank; rank 0 prints one JSON line per (impl, size).
// Usage: bench_allreduce  (env: RANK, WORLD_SIZE, MASTER_PORT, RAW_PORT)
#include <ddp/ddp.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

int env_int(const char* n, int d) {
  const char* v = std::getenv(n);
  return v ? std::atoi(v) : d;
}

int iterations_for(size_t bytes) {
  if (bytes <= 64 * 1024) return 400;
  if (bytes <= 1 << 20) return 100;
  if (bytes <= 16 << 20) return 20;
  return 8;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}
}  // namespace

int main() {
  int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
  int rounds = env_int("BENCH_ROUNDS", 3);
  size_t max_bytes = static_cast<size_t>(env_int("BENCH_MAX_MB", 64)) << 20;

  // libddp group (MASTER_PORT) and a raw c10d Gloo group (RAW_PORT).
  ddp_group* g = nullptr;
  if (ddp_group_init(&g, nullptr, nullptr) != DDP_OK) {
    std::fprintf(stderr, "ddp_group_init: %s\n", ddp_last_error_message());
    return 1;
  }
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(env_int("RAW_PORT", 0));
  so.isServer = rank == 0;
  so.numWorkers = world;
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);

  std::vector<size_t> sizes;
  for (size_t b = 4; b <= max_bytes; b *= 4) sizes.push_back(b);
  for (size_t bytes : sizes) {
    size_t n = bytes / 4;
    std::vector<float> buf(n, 1.0f);
    int64_t shape[1] = {static_cast<int64_t>(n)};
    ddp_tensor* t = nullptr;
    ddp_tensor_from_blob(&t, buf.data(), DDP_FLOAT32, shape, 1);
    at::Tensor raw = at::from_blob(buf.data(), {static_cast<int64_t>(n)}, at::kFloat);
    std::vector<at::Tensor> raw_vec{raw};
    int iters = iterations_for(bytes) * rounds;
    std::vector<double> capi_us, raw_us, diff_us;
    auto time_capi = [&] {
      auto t0 = Clock::now();
      if (ddp_all_reduce(g, t, DDP_SUM) != DDP_OK) {
        std::fprintf(stderr, "all_reduce: %s\n", ddp_last_error_message());
        std::exit(1);
      }
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    auto time_raw = [&] {
      auto t0 = Clock::now();
      pg->allreduce(raw_vec)->wait();
      return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    };
    ddp_barrier(g);
    // Paired samples: one call of each per iteration, the order alternating,
    // so both see the same machine state; 3 warm-up pairs.
    for (int i = 0; i < iters + 3; ++i) {
      double a, b;
      if (i % 2) {
        a = time_capi();
        b = time_raw();
      } else {
        b = time_raw();
        a = time_capi();
      }
      if (i < 3) continue;
      capi_us.push_back(a);
      raw_us.push_back(b);
      diff_us.push_back(a - b);
    }
    if (rank == 0) {
      const char* names[2] = {"capi", "c10d"};
      for (int impl = 0; impl < 2; ++impl) {
        auto& v = impl == 0 ? capi_us : raw_us;
        std::printf("{\"impl\": \"%s\", \"bytes\": %zu, \"p50_us\": %.3f, \"p90_us\": %.3f, \"n\": %zu, "
                    "\"paired_diff_p50_us\": %.3f}\n",
                    names[impl], bytes, pct(v, 0.5), pct(v, 0.9), v.size(), impl == 0 ? pct(diff_us, 0.5) : 0.0);
      }
      std::fflush(stdout);
    }
    ddp_tensor_free(t);
  }
  ddp_group_free(g);
  return 0;
}
