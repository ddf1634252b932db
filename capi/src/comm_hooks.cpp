// Comm hook handles: PyTorch's hooks from core/hooks, and C callbacks
// adapted to the core's CommHook interface.
#include "ddp/comm_hook.h"

#include "common/error.h"
#include "ddp/comm_hook_slot.h"
#include "handles.h"
#include "hooks/compression_hooks.h"
#include "hooks/post_localsgd.h"
#include "hooks/powersgd.h"

using namespace ddp::capi;

namespace {

ddp_status make_hook(ddp_comm_hook** out, const char* fn, const std::function<std::shared_ptr<ddp::CommHook>()>& make) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_comm_hook>();
    h->hook = make();
    hand_out(out, std::move(h));
  });
}

// Calls a C hook with a ddp_comm_bucket describing the bucket. The hook gets
// the reducer's group handle while the caller still holds it; once the
// caller has freed it, a handle of the hook's own onto the same group (so the
// hook never receives a freed pointer).
class CHook : public ddp::CommHook {
 public:
  CHook(ddp_comm_hook_fn fn, void* user, std::shared_ptr<ddp::Group> group, ddp_group* callers)
      : fn_(fn), user_(user), group_(group), callers_(callers) {
    auto own = std::make_unique<ddp_group>();
    own->group = std::move(group);
    hand_out(&own_, std::move(own));
  }
  ~CHook() override { release(own_); }

  ddp::PendingPtr run(ddp::Group& group, const ddp::BucketView& v) override {
    auto* callers = live(callers_);
    ddp_group* handle = callers && callers->group == group_ ? callers_ : own_;
    ddp_tensor* buffer = nullptr;
    hand_out(&buffer, wrap_tensor(v.flat));
    std::vector<size_t> ndims;
    std::vector<const int64_t*> shapes;
    for (auto& s : v.shapes) {
      ndims.push_back(s.size());
      shapes.push_back(s.data());
    }
    ddp_comm_bucket b{buffer, v.index, v.is_last ? 1 : 0, v.divisor, v.param_indices.size(),
                      v.param_indices.data(), v.offsets.data(), ndims.data(), shapes.data()};
    ddp_status s = fn_(handle, &b, user_);
    release(buffer);
    if (s != DDP_OK) {
      std::string why = ddp_last_error_message();
      group.fail_and_publish(s, "a custom comm hook returned " + std::string(ddp_status_string(s)) + " on rank " +
                                    std::to_string(group.rank()) + " for bucket " + std::to_string(v.index) +
                                    (why.empty() ? "" : ": " + why));
    }
    return ddp::completed(group, "custom comm hook");
  }

 private:
  ddp_comm_hook_fn fn_;
  void* user_;
  std::shared_ptr<ddp::Group> group_;
  ddp_group* callers_;  // handles (tokens), looked up on each call
  ddp_group* own_ = nullptr;
};

}  // namespace

namespace ddp::capi {
// The core hook a handle stands for, bound to the group of `reducer`.
std::shared_ptr<ddp::CommHook> bind_hook(const ddp_comm_hook* h, const ddp_reducer* reducer) {
  if (h->fn) return std::make_shared<CHook>(h->fn, h->user_data, reducer->group, reducer->handle);
  if (h->inner) return ddp::make_compress_wrapper(h->wrap_dtype, bind_hook(h->inner.get(), reducer));
  return h->hook;
}
}  // namespace ddp::capi

extern "C" {

ddp_status ddp_comm_hook_allreduce(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_allreduce", [] { return ddp::make_allreduce_hook(); });
}
ddp_status ddp_comm_hook_fp16_compress(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_fp16_compress", [] { return ddp::make_compress_hook(at::kHalf); });
}
ddp_status ddp_comm_hook_bf16_compress(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_bf16_compress", [] { return ddp::make_compress_hook(at::kBFloat16); });
}
ddp_status ddp_comm_hook_noop(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_noop", [] { return ddp::make_noop_hook(); });
}

// A wrapper keeps a copy of its inner hook's handle (sharing its state) and
// is bound, with the inner hook, when a reducer takes it.
static ddp_status wrap(ddp_comm_hook** out, const ddp_comm_hook* inner, at::ScalarType t, const char* fn) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* in = require(inner, "inner");
    auto h = std::make_unique<ddp_comm_hook>();
    h->inner = std::make_shared<ddp_comm_hook>(*in);
    h->wrap_dtype = t;
    h->stats = in->stats;
    hand_out(out, std::move(h));
  });
}
ddp_status ddp_comm_hook_wrap_fp16(ddp_comm_hook** out, const ddp_comm_hook* inner) {
  return wrap(out, inner, at::kHalf, "ddp_comm_hook_wrap_fp16");
}
ddp_status ddp_comm_hook_wrap_bf16(ddp_comm_hook** out, const ddp_comm_hook* inner) {
  return wrap(out, inner, at::kBFloat16, "ddp_comm_hook_wrap_bf16");
}

ddp_status ddp_comm_hook_post_localsgd(ddp_comm_hook** out, ddp_group* subgroup, int64_t start_localsgd_iter,
                                       int post_local_gradient_allreduce) {
  return make_hook(out, "ddp_comm_hook_post_localsgd", [&] {
    std::shared_ptr<ddp::Group> sub = subgroup ? require(subgroup, "subgroup")->group : nullptr;
    return ddp::make_post_localsgd_hook(sub, start_localsgd_iter, post_local_gradient_allreduce != 0);
  });
}

ddp_status ddp_powersgd_options_init(ddp_powersgd_options* opts, unsigned int version) {
  if (!opts) return invalid("ddp_powersgd_options_init: opts is NULL");
  if (version != DDP_POWERSGD_OPTIONS_VERSION)
    return invalid("ddp_powersgd_options_init: unknown version " + std::to_string(version));
  *opts = ddp_powersgd_options DDP_POWERSGD_OPTIONS_INIT;
  return DDP_OK;
}

ddp_status ddp_comm_hook_powersgd(ddp_comm_hook** out, const ddp_powersgd_options* opts) {
  if (!out) return invalid("ddp_comm_hook_powersgd: out is NULL");
  *out = nullptr;
  return fence([&] {
    ddp::PowerSgdOptions o;
    if (opts) {
      ddp::check_arg(opts->version == DDP_POWERSGD_OPTIONS_VERSION,
                     "ddp_comm_hook_powersgd: unknown options version " + std::to_string(opts->version));
      o.matrix_approximation_rank = opts->matrix_approximation_rank;
      o.start_powersgd_iter = opts->start_powersgd_iter;
      o.min_compression_rate = opts->min_compression_rate;
      o.use_error_feedback = opts->use_error_feedback != 0;
      o.warm_start = opts->warm_start != 0;
      o.orthogonalization_epsilon = opts->orthogonalization_epsilon;
      o.random_seed = opts->random_seed;
      o.batch_tensors_with_same_shape = opts->batch_tensors_with_same_shape != 0;
      o.batched = opts->batched != 0;
    }
    auto h = std::make_unique<ddp_comm_hook>();
    h->stats = ddp::make_powersgd_hook(o);
    h->hook = h->stats;
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_comm_hook_compression_stats(const ddp_comm_hook* hook, ddp_compression_stats* out) {
  if (!out) return invalid("ddp_comm_hook_compression_stats: out is NULL");
  return fence([&] {
    auto* h = require(hook, "hook");
    ddp::check_arg(h->stats != nullptr, "ddp_comm_hook_compression_stats: the hook is not a PowerSGD hook");
    ddp::CompressionStats s = h->stats->stats();
    *out = ddp_compression_stats{s.numel_before, s.numel_after, s.iteration};
  });
}

ddp_status ddp_comm_hook_custom(ddp_comm_hook** out, ddp_comm_hook_fn fn, void* user_data) {
  if (!out) return invalid("ddp_comm_hook_custom: out is NULL");
  *out = nullptr;
  if (!fn) return invalid("ddp_comm_hook_custom: fn is NULL");
  return fence([&] {
    auto h = std::make_unique<ddp_comm_hook>();
    h->fn = fn;
    h->user_data = user_data;
    hand_out(out, std::move(h));
  });
}

void ddp_comm_hook_free(ddp_comm_hook* hook) { release(hook); }

}  // extern "C"
