// Comm hook handles: PyTorch's hooks from core/hooks, and C callbacks
// adapted to the core's CommHook interface.
#include "ddp/comm_hook.h"

#include "common/error.h"
#include "hooks/comm_hook.h"
#include "handles.h"
#include "hooks/callback_hook.h"
#include "hooks/compression_hooks.h"
#include "hooks/post_localsgd.h"
#include "hooks/powersgd.h"

using namespace ddp::capi;

namespace {

ddp_status make_hook(ddp_comm_hook** out, const char* fn, const std::function<std::shared_ptr<ddp::core::CommHook>()>& make) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto h = std::make_unique<ddp_comm_hook>();
    h->hook = make();
    hand_out(out, std::move(h));
  });
}

// A C hook's function and user data, behind core's callback hook.
struct CHookTarget {
  ddp_comm_hook_fn fn;
  void* user;
};

// Calls a C hook with handles onto the group and the bucket's buffer, both
// borrowed for the call (the group handle does not own the group: the
// reducer running the hook does).
ddp::core::Status run_c_hook(void* target, ddp::core::Group& group, const ddp::core::BucketView& v,
                             std::string* why) {
  auto* t = static_cast<CHookTarget*>(target);
  auto borrowed = std::make_unique<ddp_group>();
  borrowed->group = std::shared_ptr<ddp::core::Group>(std::shared_ptr<ddp::core::Group>(), &group);
  ddp_group* handle = nullptr;
  hand_out(&handle, std::move(borrowed));
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
  ddp_status s = t->fn(handle, &b, t->user);
  release(buffer);
  release(handle);
  if (s != DDP_OK) {
    std::string message = ddp_last_error_message();
    // A value that is no ddp_status (a hook's own error code) fails the
    // step as the backend's error, on every rank alike: the other ranks
    // take only error statuses from the failure this rank publishes.
    const bool known = ddp::core::is_error_status(s);
    *why = "a custom comm hook returned " +
           (known ? std::string(ddp_status_string(s)) : std::to_string(s) + " (not a ddp_status)") + " on rank " +
           std::to_string(group.rank()) + " for bucket " + std::to_string(v.index) +
           (message.empty() ? "" : ": " + message);
    if (!known) s = DDP_E_BACKEND;
  }
  return static_cast<ddp::core::Status>(s);
}

}  // namespace

extern "C" {

ddp_status ddp_comm_hook_allreduce(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_allreduce", [] { return ddp::core::make_allreduce_hook(); });
}
ddp_status ddp_comm_hook_fp16_compress(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_fp16_compress", [] { return ddp::core::make_compress_hook(at::kHalf); });
}
ddp_status ddp_comm_hook_bf16_compress(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_bf16_compress", [] { return ddp::core::make_compress_hook(at::kBFloat16); });
}
ddp_status ddp_comm_hook_noop(ddp_comm_hook** out) {
  return make_hook(out, "ddp_comm_hook_noop", [] { return ddp::core::make_noop_hook(); });
}

// A wrapper shares its inner hook (and its state, e.g. PowerSGD's), so the
// inner handle may be freed first.
static ddp_status wrap(ddp_comm_hook** out, const ddp_comm_hook* inner, at::ScalarType t, const char* fn) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* in = require(inner, "inner");
    auto h = std::make_unique<ddp_comm_hook>();
    h->hook = ddp::core::make_compress_wrapper(t, in->hook);
    h->stats = in->stats;
    h->post_localsgd_start = in->post_localsgd_start;
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
  ddp_status s = make_hook(out, "ddp_comm_hook_post_localsgd", [&] {
    std::shared_ptr<ddp::core::Group> sub = subgroup ? require(subgroup, "subgroup")->group : nullptr;
    return ddp::core::make_post_localsgd_hook(sub, start_localsgd_iter, post_local_gradient_allreduce != 0);
  });
  if (s == DDP_OK) live(*out)->post_localsgd_start = start_localsgd_iter;  // for the strategy's averager
  return s;
}

ddp_status ddp_powersgd_options_init(ddp_powersgd_options* opts, unsigned int version) {
  return init_options(opts, version, DDP_POWERSGD_OPTIONS_VERSION, ddp_powersgd_options DDP_POWERSGD_OPTIONS_INIT, "ddp_powersgd_options_init");
}

ddp_status ddp_comm_hook_powersgd(ddp_comm_hook** out, const ddp_powersgd_options* opts) {
  if (!out) return invalid("ddp_comm_hook_powersgd: out is NULL");
  *out = nullptr;
  return fence([&] {
    ddp::core::PowerSgdOptions o;
    if (opts) {
      ddp::core::check_arg(opts->version == DDP_POWERSGD_OPTIONS_VERSION,
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
    h->stats = ddp::core::make_powersgd_hook(o);
    h->hook = h->stats;
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_comm_hook_compression_stats(const ddp_comm_hook* hook, ddp_compression_stats* out) {
  if (!out) return invalid("ddp_comm_hook_compression_stats: out is NULL");
  return fence([&] {
    auto* h = require(hook, "hook");
    ddp::core::check_arg(h->stats != nullptr, "ddp_comm_hook_compression_stats: the hook is not a PowerSGD hook");
    ddp::core::CompressionStats s = h->stats->stats();
    *out = ddp_compression_stats{s.numel_before, s.numel_after, s.iteration};
  });
}

ddp_status ddp_comm_hook_custom(ddp_comm_hook** out, ddp_comm_hook_fn fn, void* user_data) {
  if (!out) return invalid("ddp_comm_hook_custom: out is NULL");
  *out = nullptr;
  if (!fn) return invalid("ddp_comm_hook_custom: fn is NULL");
  return fence([&] {
    auto h = std::make_unique<ddp_comm_hook>();
    h->hook = ddp::core::make_callback_hook(run_c_hook, std::make_shared<CHookTarget>(CHookTarget{fn, user_data}));
    hand_out(out, std::move(h));
  });
}

void ddp_comm_hook_free(ddp_comm_hook* hook) { release(hook); }

}  // extern "C"
