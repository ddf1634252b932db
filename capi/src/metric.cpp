// Logged metrics with Lightning's epoch semantics: core/strategy/logged_metric.
#include "ddp/metric.h"

#include "handles.h"
#include "strategy/ddp_strategy.h"
#include "strategy/logged_metric.h"

using namespace ddp::capi;

ddp_metric::~ddp_metric() = default;

extern "C" {

ddp_status ddp_metric_new(ddp_metric** out, ddp_metric_reduce reduce) {
  if (!out) return invalid("ddp_metric_new: out is NULL");
  *out = nullptr;
  if (reduce < DDP_METRIC_MEAN || reduce > DDP_METRIC_MIN)
    return invalid("ddp_metric_new: reduction " + std::to_string(static_cast<int>(reduce)) + " is unknown");
  return fence([&] {
    auto h = std::make_unique<ddp_metric>();
    h->metric = std::make_unique<ddp::core::LoggedMetric>(static_cast<ddp::core::LoggedMetric::Reduce>(reduce));
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_metric_update(ddp_metric* m, double value, int64_t batch_size) {
  return fence([&] { require(m, "metric")->metric->update(value, batch_size); });
}

ddp_status ddp_metric_compute(const ddp_metric* m, ddp_strategy* s, double* out) {
  if (!out) return invalid("ddp_metric_compute: out is NULL");
  return fence([&] {
    auto* metric = require(m, "metric");
    if (!s) {
      *out = metric->metric->compute(nullptr, at::kCPU);
      return;
    }
    auto& st = *require(s, "strategy")->strategy;
    *out = st.compute_metric(*metric->metric);
  });
}

ddp_status ddp_metric_reset(ddp_metric* m) {
  return fence([&] { require(m, "metric")->metric->reset(); });
}

void ddp_metric_free(ddp_metric* m) { release(m); }

}  // extern "C"
