// What the C arithmetic costs over the ATen call it wraps: each operator
// through the C API (handle lookups, the call, a new handle, its free)
// against the same ATen call on the same tensors, in one process,
// alternating rounds, the median of each. Small tensors (a loss's 0-d
// values, 16 floats), where the wrapper's share is largest.
//   bench_surface_ops [iterations per round, default 200000] [rounds, default 7]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ddp/ddp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

double ns_per_call(int n, const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void check(ddp_status s) {
  if (s != DDP_OK) {
    std::fprintf(stderr, "bench_surface_ops: %s\n", ddp_last_error_message());
    std::exit(2);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 7;
  at::set_num_threads(1);
  float a_data[16], b_data[16];
  for (int i = 0; i < 16; ++i) a_data[i] = 1.0f + i, b_data[i] = 2.0f + i;
  int64_t shape[1] = {16};
  ddp_tensor *a = nullptr, *b = nullptr, *s = nullptr;
  check(ddp_tensor_from_blob(&a, a_data, DDP_FLOAT32, shape, 1));
  check(ddp_tensor_from_blob(&b, b_data, DDP_FLOAT32, shape, 1));
  float s_data = 0.5f;
  check(ddp_tensor_from_blob(&s, &s_data, DDP_FLOAT32, nullptr, 0));
  at::Tensor ta = at::from_blob(a_data, {16}), tb = at::from_blob(b_data, {16}), ts = at::from_blob(&s_data, {});

  struct Case {
    std::string name;
    std::function<void()> c_api, aten;
  };
  auto take = [](ddp_tensor* t) { ddp_tensor_free(t); };
  std::vector<Case> cases = {
      {"add (16 floats)", [&] { ddp_tensor* o; check(ddp_tensor_binary(DDP_OP_ADD, a, b, &o)); take(o); },
       [&] { at::Tensor o = at::add(ta, tb); }},
      {"mul by scalar (0-d)", [&] { ddp_tensor* o; check(ddp_tensor_binary_scalar(DDP_OP_MUL, s, 0.1, &o)); take(o); },
       [&] { at::Tensor o = at::mul(ts, 0.1); }},
      {"exp (16 floats)", [&] { ddp_tensor* o; check(ddp_tensor_unary(DDP_OP_EXP, a, &o)); take(o); },
       [&] { at::Tensor o = at::exp(ta); }},
      {"mean (16 floats)", [&] { ddp_tensor* o; check(ddp_tensor_mean(a, nullptr, 0, 0, &o)); take(o); },
       [&] { at::Tensor o = at::mean(ta); }},
      {"item (0-d)", [&] { double v; check(ddp_tensor_item(s, &v)); }, [&] { volatile double v = ts.item<double>(); (void)v; }},
  };
  std::printf("%-22s %12s %12s %12s\n", "operator", "C API ns", "ATen ns", "added ns");
  for (auto& c : cases) {
    std::vector<double> capi, aten;
    ns_per_call(n / 10, c.c_api);  // warm up both
    ns_per_call(n / 10, c.aten);
    for (int r = 0; r < rounds; ++r) {
      capi.push_back(ns_per_call(n, c.c_api));
      aten.push_back(ns_per_call(n, c.aten));
    }
    const double mc = median(capi), ma = median(aten);
    std::printf("%-22s %12.0f %12.0f %12.0f\n", c.name.c_str(), mc, ma, mc - ma);
  }
  ddp_tensor_free(a);
  ddp_tensor_free(b);
  ddp_tensor_free(s);
  return 0;
}
