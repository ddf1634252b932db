#include "ddp/model_averager.h"

#include "common/error.h"
#include "handles.h"
#include "hooks/post_localsgd.h"

using namespace ddp::capi;

ddp_model_averager::~ddp_model_averager() = default;

extern "C" {

ddp_status ddp_model_averager_new(ddp_model_averager** out, ddp_group* group, int64_t period, int64_t warmup_steps) {
  if (!out) return invalid("ddp_model_averager_new: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_model_averager>();
    h->group = require(group, "group")->group;
    h->averager = std::make_unique<ddp::core::ModelAverager>(*h->group, period, warmup_steps);
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_model_averager_step(ddp_model_averager* avg, ddp_tensor* const* params, size_t n) {
  return fence([&] {
    auto* a = require(avg, "averager");
    ddp::core::check_arg(params || n == 0, "ddp_model_averager_step: params is NULL");
    std::vector<at::Tensor> ts;
    for (size_t i = 0; i < n; ++i) ts.push_back(require(params[i], "params[i]")->t);
    a->averager->step(ts);
  });
}

void ddp_model_averager_free(ddp_model_averager* avg) { release(avg); }

}  // extern "C"
