// ddp_all_reduce through the C API, or raw c10d ProcessGroupGloo, each in
// processes of its own (run_allreduce.sh alternates the contenders). One
// process per rank; rank 0 prints one JSON line per size.
// Usage: bench_allreduce  (env: BENCH_IMPL=capi|c10d|memcpy, RANK, WORLD_SIZE, MASTER_PORT;
// BENCH_BACKEND: the C API's backend, default its own default; BENCH_MIN_BYTES,
// BENCH_MAX_BYTES (else BENCH_MAX_MB)); BENCH_BYTES: that one size instead)
// BENCH_IMPL=memcpy times one process's memcpy of each size instead (the
// bandwidth the shared-memory backend is measured against). BENCH_OP=broadcast
// (from rank 0) or all_gather (`bytes` from each rank, into one output
// tensor made before the timing, ddp_all_gather_into_tensor, as MPI_Allgather
// reuses its receive buffer) times the other collectives the DDP path uses
// (C API only), as bench_mpi_allreduce does under the same variable.
// BENCH_OP=reducer times DDP's bucket path instead: a ddp_reducer over one
// gradient of `bytes` in one bucket, each call marking it ready and
// finishing the step (an average, where allreduce sums); BENCH_OP=
// reducer_view the same with gradient_as_bucket_view, whose bucket on the
// shm backend is memory every rank maps, reduced where it lies (issue 28:
// what DDP's buckets cost where the caller-memory all-reduce is bound by
// the bytes it moves).
// BENCH_DUMP=<prefix> writes every timed call's microseconds, one per line,
// to <prefix>.<bytes>.<rank> on every rank: where a p90 stands apart from
// the p50, it shows which calls are slow and whether the ranks go in step.
#include <ddp/ddp.h>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
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
// A reducer whose one bucket is the one gradient of `bytes` (the parameter
// `param`): with `view` the gradient lives in the bucket storage.
ddp_reducer* one_bucket_reducer(ddp_group* g, ddp_tensor* param, size_t bytes, bool view) {
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.bucket_cap_mb = o.first_bucket_mb = static_cast<double>(bytes >> 20) + 1;
  o.broadcast_parameters = 0;
  o.gradient_as_bucket_view = view;
  ddp_tensor* const grads[1] = {view ? nullptr : param};  // without the view the parameter's memory serves as its gradient
  ddp_reducer* r = nullptr;
  if (ddp_reducer_new(&r, g, &param, grads, 1, &o) != DDP_OK) {
    std::fprintf(stderr, "ddp_reducer_new: %s\n", ddp_last_error_message());
    std::exit(1);
  }
  return r;
}

ddp_status one_step(ddp_reducer* r) {
  ddp_status s = ddp_reducer_mark_ready(r, 0);
  return s == DDP_OK ? ddp_reducer_finish(r) : s;
}
}  // namespace

// One implementation per process (BENCH_IMPL): each contender holds exactly
// one process group, as torch.distributed's peer does, so no Gloo threads of
// another group compete with the one measured.
int main() {
  int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
  int rounds = env_int("BENCH_ROUNDS", 3);
  size_t max_bytes = static_cast<size_t>(env_int("BENCH_MAX_MB", 64)) << 20;
  const char* which = std::getenv("BENCH_IMPL") ? std::getenv("BENCH_IMPL") : "capi";
  bool capi = std::string(which) == "capi";
  bool copy_only = std::string(which) == "memcpy";
  if (!capi && !copy_only && std::string(which) != "c10d") {
    std::fprintf(stderr, "BENCH_IMPL must be capi, c10d or memcpy, not %s\n", which);
    return 2;
  }
  std::string label = which;
  const std::string op = std::getenv("BENCH_OP") ? std::getenv("BENCH_OP") : "allreduce";
  const bool reducer = op == "reducer" || op == "reducer_view";
  if (op != "allreduce" && (!capi || (op != "broadcast" && op != "all_gather" && !reducer))) {
    std::fprintf(stderr,
                 "BENCH_OP must be allreduce, or broadcast, all_gather, reducer or reducer_view with BENCH_IMPL=capi, "
                 "not %s\n",
                 op.c_str());
    return 2;
  }
  // Chosen once, as bench_mpi_allreduce.c does: a string compare in the
  // timed call cost a 4-byte broadcast about a tenth of its time.
  const bool bcast = op == "broadcast", gather = op == "all_gather";

  ddp_group* g = nullptr;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  if (copy_only) {
    rank = 0;
  } else if (capi) {
    ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
    o.backend = std::getenv("BENCH_BACKEND");
    if (ddp_group_init(&g, nullptr, &o) != DDP_OK) {
      std::fprintf(stderr, "ddp_group_init: %s\n", ddp_last_error_message());
      return 1;
    }
    label = std::string("capi-") + ddp_group_backend(g);
  } else {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env_int("MASTER_PORT", 0));
    so.isServer = rank == 0;
    so.numWorkers = world;
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", so);
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
  }

  std::vector<size_t> sizes;
  size_t min_bytes = static_cast<size_t>(env_int("BENCH_MIN_BYTES", 4));
  if (const char* mb = std::getenv("BENCH_MAX_BYTES")) max_bytes = std::strtoull(mb, nullptr, 10);
  if (const char* only = std::getenv("BENCH_BYTES")) {  // exactly this size (a model's gradient bytes)
    sizes.push_back(std::strtoull(only, nullptr, 10) / 4 * 4);
  } else {
    for (size_t b = 4; b <= max_bytes; b *= 4)
      if (b >= min_bytes) sizes.push_back(b);
  }
  // The same warm-up as bench_mpi_allreduce.c's: 2000 4-byte calls before
  // the first size. In the first tens of milliseconds after the group is set
  // up, some runs on our 2-core VMs took ~100 us per call on one size,
  // whatever that size was (p90 110 us at 4 B in one full run, 0.3 us in the next).
  if (!copy_only) {
    float one = 1.0f;
    int64_t shape1[1] = {1};
    ddp_tensor* w = nullptr;
    at::Tensor wraw = at::from_blob(&one, {1}, at::kFloat);
    std::vector<at::Tensor> wvec{wraw};
    if (capi) ddp_tensor_from_blob(&w, &one, DDP_FLOAT32, shape1, 1);
    for (int i = 0; i < 2000; ++i) {
      if (capi) ddp_all_reduce(g, w, DDP_SUM);
      else pg->allreduce(wvec)->wait();
    }
    ddp_tensor_free(w);
  }
  for (size_t bytes : sizes) {
    size_t n = bytes / 4;
    std::vector<float> buf(n, 1.0f), copy(copy_only ? n : 0), gathered(op == "all_gather" ? n * world : 0);
    int64_t shape[1] = {static_cast<int64_t>(n)}, gathered_shape[1] = {static_cast<int64_t>(gathered.size())};
    ddp_tensor *t = nullptr, *gathered_t = nullptr;
    at::Tensor raw = at::from_blob(buf.data(), {static_cast<int64_t>(n)}, at::kFloat);
    std::vector<at::Tensor> raw_vec{raw};
    if (capi) ddp_tensor_from_blob(&t, buf.data(), DDP_FLOAT32, shape, 1);
    if (capi && op == "all_gather") ddp_tensor_from_blob(&gathered_t, gathered.data(), DDP_FLOAT32, gathered_shape, 1);
    ddp_reducer* red = reducer ? one_bucket_reducer(g, t, bytes, op == "reducer_view") : nullptr;
    auto call = [&] {
      if (copy_only) {
        std::memcpy(copy.data(), buf.data(), bytes);
        buf[0] = copy[n - 1];  // keeps the copy from being optimised away
      } else if (capi) {
        ddp_status s = bcast     ? ddp_broadcast(g, t, 0)
                       : gather  ? ddp_all_gather_into_tensor(g, t, gathered_t)
                       : reducer ? one_step(red)
                                 : ddp_all_reduce(g, t, DDP_SUM);
        if (s != DDP_OK) {
          std::fprintf(stderr, "%s: %s\n", op.c_str(), ddp_last_error_message());
          std::exit(1);
        }
      } else {
        pg->allreduce(raw_vec)->wait();
      }
    };
    std::vector<double> us;
    for (int r = 0; r < rounds; ++r) {
      if (capi) ddp_barrier(g);
      else if (pg) pg->barrier()->wait();
      for (int i = 0; i < iterations_for(bytes) + 3; ++i) {
        auto t0 = Clock::now();
        call();
        double el = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        if (i >= 3) us.push_back(el);
      }
    }
    if (const char* dump = std::getenv("BENCH_DUMP")) {
      const std::string path = std::string(dump) + "." + std::to_string(bytes) + "." + std::to_string(rank);
      if (FILE* f = std::fopen(path.c_str(), "w")) {
        for (double x : us) std::fprintf(f, "%.3f\n", x);
        std::fclose(f);
      }
    }
    if (rank == 0) {
      double sum = 0;
      for (double x : us) sum += x;
      std::printf("{\"impl\": \"%s\", \"bytes\": %zu, \"p10_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, "
                  "\"mean_us\": %.3f, \"n\": %zu}\n",
                  label.c_str(), bytes, pct(us, 0.1), pct(us, 0.5), pct(us, 0.9), us.empty() ? 0.0 : sum / us.size(),
                  us.size());
      std::fflush(stdout);
    }
    ddp_reducer_free(red);
    ddp_tensor_free(t);
    ddp_tensor_free(gathered_t);
  }
  ddp_group_free(g);
  return 0;
}
