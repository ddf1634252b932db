#include "reducer/grad_reducer.h"

#include <ATen/ScalarOps.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/mul.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>

#include "common/error.h"
#include "reducer/bucket_assignment.h"
#include "reducer/bucket_copy.h"

namespace ddp::core {
namespace {

std::string list_indices(const std::vector<size_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 32; ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  if (v.size() > 32) s += ", ... (" + std::to_string(v.size()) + " in all)";
  return s;
}

}  // namespace

void check_bucket_caps(double first_bucket_mb, double bucket_cap_mb) {
  constexpr double kMostMb = 8796093022208.0;  // 2^43 MiB: 2^63 bytes
  for (auto [name, mb] : {std::pair<const char*, double>{"first_bucket_mb", first_bucket_mb}, {"bucket_cap_mb", bucket_cap_mb}})
    check_arg(mb > 0 && mb < kMostMb, std::string("reducer: ") + name + " " + std::to_string(mb) +
                                          " is not a size in MiB (a positive number below 2^43)");
}

Reducer::Reducer(Group& group, std::vector<at::Tensor> params, std::vector<at::Tensor> grads,
                 const ReducerOptions& opts)
    : group_(group), grads_(std::move(grads)), opts_(opts) {
  const size_t n = grads_.size();
  check_arg(n > 0, "reducer: no gradients");
  check_bucket_caps(opts.first_bucket_mb, opts.bucket_cap_mb);
  check_arg(params.empty() || params.size() == n, "reducer: " + std::to_string(params.size()) +
                                                      " parameters for " + std::to_string(n) + " gradients");
  infos_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const at::Tensor& ref = grads_[i].defined() ? grads_[i] : (params.empty() ? grads_[i] : params[i]);
    check_arg(ref.defined(), "reducer: gradient " + std::to_string(i) + " is undefined and no parameter gives its shape");
    check_arg(ref.is_contiguous(), "reducer: gradient " + std::to_string(i) + " is not contiguous");
    check_arg(at::isFloatingType(ref.scalar_type()), "reducer: gradient " + std::to_string(i) + " is not floating point");
    if (!params.empty() && grads_[i].defined())
      check_arg(params[i].numel() == grads_[i].numel(), "reducer: parameter " + std::to_string(i) +
                                                            " and its gradient differ in size");
    infos_[i] = {static_cast<size_t>(ref.numel()) * ref.element_size(), static_cast<int>(ref.scalar_type()),
                 ref.is_cuda() ? 1 + ref.get_device() : 0};
    if (!grads_[i].defined()) grads_[i] = at::zeros_like(params[i]);  // replaced by a bucket view below
  }

  // Gradients become ready roughly in reverse registration order: assign
  // buckets in that order, the first one small so that communication starts early.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = n - 1 - i;
  BucketAssignment assignment;
  if (opts.static_graph && buckets_may_be_rebuilt()) {
    // PyTorch's DDP with static_graph: one bucket (per dtype and device)
    // until the rebuild after the second step, listed in reverse.
    assignment = compute_bucket_assignment(infos_, {SIZE_MAX});
    std::reverse(assignment.buckets.begin(), assignment.buckets.end());
  } else {
    assignment = compute_bucket_assignment(infos_, bucket_caps(), order);
  }
  check_layout_matches_across_ranks(assignment);
  shared_buckets_ = wants_shared_buckets();
  assign_buckets(assignment);
  if (opts.static_graph) {
    static_marks_.assign(n, 0);
    static_left_.assign(n, 0);
  }
  ready_.assign(n, 0);
  via_slot_.assign(n, 0);
  parts_possible_ = true;
  for (size_t i = 0; i < n; ++i)
    parts_possible_ = parts_possible_ && infos_[i].device == 0 &&
                      takes_parts(group_, static_cast<at::ScalarType>(infos_[i].dtype));
  reset_step();
  if (StreamWatch::device_orders(group_)) watch_ = std::make_unique<StreamWatch>(group_);

  if (opts.broadcast_parameters && !params.empty()) {
    // All ranks start from rank 0's parameters (DDP's _sync_module_states).
    at::NoGradGuard no_grad;
    for (auto& p : params) {
      at::Tensor data = p.detach();
      auto w = broadcast(group_, data.is_contiguous() ? data : data.contiguous(), 0);
      w->wait();
    }
  }
}

// Buckets still in flight are waited for, each within the group's timeout:
// their all-reduces read and write buffers the caller may free or reuse next,
// and must not be left running underneath the group's next collective.
// Failures are dropped: a destructor has nobody to report them to (the next
// call on a broken group reports the failure).
Reducer::~Reducer() {
  source_.reset();  // its hooks (autograd's) may start no bucket from here on
  for (auto& b : buckets_) {
    if (!b.work) continue;
    try {
      b.work->wait();
    } catch (...) {
    }
    b.work.reset();
  }
  if (hook_) hook_->detach(this);
}

bool Reducer::buckets_may_be_rebuilt() const {
  return !opts_.gradient_as_bucket_view || opts_.views_rebound_on_rebuild;
}

std::vector<size_t> Reducer::bucket_caps() const {
  auto mb = [](double v) { return static_cast<size_t>(v * 1024 * 1024); };
  return {mb(opts_.first_bucket_mb), mb(opts_.bucket_cap_mb)};
}

void Reducer::assign_buckets(const BucketAssignment& assignment) {
  const size_t n = grads_.size();
  buckets_.clear();
  bucket_of_.assign(n, 0);
  position_in_bucket_.assign(n, 0);
  for (size_t b = 0; b < assignment.buckets.size(); ++b) {
    Bucket bucket;
    bucket.indices = assignment.buckets[b];
    int64_t total = 0;
    for (size_t k = 0; k < bucket.indices.size(); ++k) {
      size_t i = bucket.indices[k];
      bucket_of_[i] = b;
      position_in_bucket_[i] = k;
      bucket.offsets.push_back(total);
      total += grads_[i].numel();
    }
    const auto options = grads_[bucket.indices.front()].options();
    const at::ScalarType type = options.dtype().toScalarType();
    if (shared_buckets_) bucket.flat = shared_bucket(group_, type, total);
    bucket.shared_scalable = bucket.flat.defined() && takes_parts(group_, type);
    if (!bucket.flat.defined()) bucket.flat = at::empty({total}, options);
    bucket.parts.resize(bucket.indices.size());
    buckets_.push_back(std::move(bucket));
  }
  // Each gradient's view of its bucket, made once: a step copies through
  // them twice per gradient, and a narrow and a view per copy cost more than
  // a small model's copy itself (PyTorch's reducer keeps them too).
  slots_.assign(n, at::Tensor());
  for (size_t i = 0; i < n; ++i) {
    const Bucket& b = buckets_[bucket_of_[i]];
    slots_[i] = b.flat.narrow(0, b.offsets[position_in_bucket_[i]], grads_[i].numel()).view(grads_[i].sizes());
  }
  if (opts_.gradient_as_bucket_view) {
    // The gradients live in the buckets: no copy in, no copy out. (When the
    // buckets are rebuilt, a gradient that is its old view moves along.)
    for (size_t i = 0; i < n; ++i) {
      at::Tensor view = slot(i);
      view.copy_(grads_[i]);
      if (source_) {
        at::Tensor g = source_->gradient(i);
        if (g.defined() && g.is_alias_of(grads_[i])) source_->bind(i, view);
      }
      grads_[i] = view;
    }
  }
  check_no_aliasing();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    BucketView& v = buckets_[b].view;
    v.flat = buckets_[b].flat;
    v.index = b;
    v.is_last = b + 1 == buckets_.size();
    v.param_indices = buckets_[b].indices;
    v.offsets = buckets_[b].offsets;
    for (size_t i : buckets_[b].indices) v.shapes.emplace_back(grads_[i].sizes().begin(), grads_[i].sizes().end());
  }
}

void Reducer::check_no_aliasing() const {
  // Two gradients over the same bytes would be summed twice and written
  // back over each other: refuse, naming both.
  struct Span { uintptr_t begin, end; size_t index; };
  std::vector<Span> spans;
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (grads_[i].numel() == 0) continue;
    auto begin = reinterpret_cast<uintptr_t>(grads_[i].data_ptr());
    spans.push_back({begin, begin + grads_[i].numel() * grads_[i].element_size(), i});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < spans.size(); ++k)
    if (spans[k].begin < spans[k - 1].end)
      fail(Status::InvalidArgument, "reducer: gradients " + std::to_string(std::min(spans[k - 1].index, spans[k].index)) +
                                       " and " + std::to_string(std::max(spans[k - 1].index, spans[k].index)) +
                                       " share memory; every gradient needs a buffer of its own");
}

bool Reducer::wants_shared_buckets() {
  if (!opts_.gradient_as_bucket_view || !offers_shared_buckets(group_)) return false;
  for (const TensorInfo& info : infos_)
    if (info.device != 0) return false;
  return true;
}

void Reducer::check_layout_matches_across_ranks(const BucketAssignment& assignment) {
  // A fingerprint of what the buckets' collectives depend on: the count,
  // each gradient's size and dtype, and the bucket boundaries.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (auto& g : grads_) {
    mix(static_cast<uint64_t>(g.numel()));
    mix(static_cast<uint64_t>(g.scalar_type()));
  }
  for (auto& b : assignment.buckets) mix(b.size() + (uint64_t{1} << 40));
  // `host` outlives the comparison below: on CUDA the gathered row is a
  // device copy, and `m` must not point into a freed host tensor.
  at::Tensor host = at::empty({3}, at::TensorOptions().dtype(at::kLong));
  auto* m = host.data_ptr<int64_t>();
  m[0] = static_cast<int64_t>(grads_.size());
  m[1] = static_cast<int64_t>(assignment.buckets.size());
  m[2] = static_cast<int64_t>(h >> 1);
  at::Tensor mine = host;
  if (group_.device().type == DeviceType::CUDA) mine = host.to(at::Device(at::kCUDA, group_.device().index));
  auto p = all_gather(group_, mine);
  p->wait();
  at::Tensor all = p->tensors[0].cpu();
  auto* a = all.data_ptr<int64_t>();
  std::string differ;
  for (int r = 0; r < group_.size(); ++r) {
    const int64_t* row = a + 3 * r;
    if (row[0] == m[0] && row[1] == m[1] && row[2] == m[2]) continue;
    differ += (differ.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) + " has " +
              std::to_string(row[0]) + " gradients in " + std::to_string(row[1]) + " buckets" +
              (row[0] == m[0] && row[1] == m[1] ? " with other sizes or dtypes" : "");
  }
  if (!differ.empty())
    fail(Status::InvalidArgument, "reducer: the ranks' gradient layouts differ (rank " + std::to_string(group_.rank()) +
                                     " has " + std::to_string(m[0]) + " gradients in " + std::to_string(m[1]) +
                                     " buckets; " + differ + "): every rank must pass the same gradients, "
                                     "in the same order, with the same bucket caps");
}

void Reducer::abandon_step(const std::string& why) {
  for (auto& b : buckets_) b.work.reset();
  reset_step();
  abandoned_ = why;
}

void Reducer::drop_step() {
  abandon_step("");
  abandoned_.clear();
}

template <typename F>
void Reducer::abandon_on_failure(const char* op, F&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    abandon_step(std::string(op) + " failed: " + e.what());
    throw;
  }
}

bool Reducer::step_in_progress() const {
  bool counted = static_steps_ == 0 && std::any_of(static_marks_.begin(), static_marks_.end(), [](int m) { return m; });
  return counted || std::any_of(ready_.begin(), ready_.end(), [](char r) { return r != 0; });
}

at::Tensor Reducer::current_grad(size_t i) {
  if (!source_) return grads_[i];
  at::Tensor g = source_->gradient(i);
  return g.defined() ? g : grads_[i];  // no gradient this step (unused): zeros of the right shape
}

void Reducer::set_gradient_source(std::unique_ptr<GradientSource> source) {
  refuse_from_own_hook("set_gradient_source");
  if (step_in_progress()) fail(Status::State, "set_gradient_source: a step is in progress");
  // grads_ keep zeros of each gradient's shape, for gradients a step lacks
  // (with gradient_as_bucket_view they are the bucket views themselves).
  for (auto& g : grads_) g.zero_();
  source_ = std::move(source);
  if (opts_.gradient_as_bucket_view) {
    // As PyTorch's DDP: a gradient that exists already moves into its bucket.
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < grads_.size(); ++i) {
      at::Tensor g = source_->gradient(i);
      if (!g.defined()) continue;
      grads_[i].copy_(g);  // grads_[i] is gradient i's bucket view
      source_->bind(i, grads_[i]);
    }
  }
}

const std::vector<size_t>& Reducer::bucket_indices(size_t b) const {
  check_arg(b < buckets_.size(), "bucket " + std::to_string(b) + " of " + std::to_string(buckets_.size()));
  return buckets_[b].indices;
}

const at::Tensor& Reducer::gradient(size_t i) const {
  check_arg(i < grads_.size(), "gradient index " + std::to_string(i) + " >= " + std::to_string(grads_.size()));
  return grads_[i];
}

const at::Tensor& Reducer::slot(size_t i) const { return slots_[i]; }

// PyTorch's reducer with gradient_as_bucket_view: a gradient that is its
// bucket view already (accumulated there by autograd) is divided in place; any
// other (the first step, or after zero_grad set it to none) is copied in,
// scaled on the way, and becomes the view when the step finishes.
void Reducer::bind_in(size_t i, at::Tensor view) {
  at::Tensor g = source_->gradient(i);
  if (!g.defined()) {  // none this step: zeros, as PyTorch
    view.zero_();
    return;
  }
  const bool scaled_later = hook_ || scaled_by_reduce(bucket_of_[i]);
  if (g.is_alias_of(view)) {
    if (!scaled_later) view.div_(divisor_);
    return;
  }
  if (scaled_later) copy_plain(view, g.detach());
  else copy_divided(view, g.detach(), divisor_);
}

// PyTorch divides a gradient that is its bucket view (x / d) and multiplies
// one it copies in (x * (1/d)); the reduce multiplies. The two agree bit for
// bit where 1/d is exact: d a power of two (the joined ranks' count may be
// any number).
bool Reducer::scaled_by_reduce(size_t b) const {
  return buckets_[b].shared_scalable && !hook_ && divisor_ > 0 && (divisor_ & (divisor_ - 1)) == 0;
}

bool Reducer::in_place_step() {
  if (in_place_ < 0) in_place_ = parts_possible_ && !hook_ && !opts_.gradient_as_bucket_view && !group_.detail_checks();
  return in_place_ == 1;
}

namespace {
bool reducible_in_place(const at::Tensor& g, const at::Tensor& like) {
  return g.is_cpu() && g.layout() == at::kStrided && g.is_contiguous() && g.scalar_type() == like.scalar_type() &&
         g.numel() == like.numel() && !g.requires_grad() && !g.is_neg() && !g.is_conj();
}
}  // namespace

// The caller's own buffers were checked once (check_no_aliasing); a
// source's may be new each step. Two over the same bytes would be reduced
// into each other.
void Reducer::claim_span(const at::Tensor& g, size_t i) {
  if (g.nbytes() == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(g.data_ptr()), end = begin + g.nbytes();
  auto next = in_place_spans_.upper_bound(begin);
  auto clash = next != in_place_spans_.end() && next->first < end ? next : in_place_spans_.end();
  if (clash == in_place_spans_.end() && next != in_place_spans_.begin() && std::prev(next)->second.first > begin)
    clash = std::prev(next);
  if (clash != in_place_spans_.end())
    fail(Status::InvalidArgument, "reducer: gradients " + std::to_string(std::min(i, clash->second.second)) + " and " +
                                      std::to_string(std::max(i, clash->second.second)) +
                                      " share memory; every gradient needs a buffer of its own");
  in_place_spans_.emplace(begin, std::make_pair(end, i));
}

void Reducer::take_in_place(size_t i) {
  at::Tensor g = source_ ? source_->gradient(i) : grads_[i];
  if (!g.defined()) return zero_in(i);  // unused this step
  at::Tensor& part = buckets_[bucket_of_[i]].parts[position_in_bucket_[i]];
  if (reducible_in_place(g, grads_[i])) {
    if (source_) claim_span(g, i);
    part = g;
    return;
  }
  // A layout the backend does not reduce where it lies: through the slot.
  copy_plain(slot(i), g.detach());
  via_slot_[i] = 1;
  part = slot(i);
}

void Reducer::zero_in(size_t i) {
  slot(i).zero_();
  if (!in_place_step()) return;
  via_slot_[i] = 1;
  buckets_[bucket_of_[i]].parts[position_in_bucket_[i]] = slot(i);
}

void Reducer::copy_in(size_t i) {
  at::Tensor view = slot(i);
  if (source_ && opts_.gradient_as_bucket_view) return bind_in(i, view);
  if (in_place_step()) return take_in_place(i);
  if (hook_) {  // the hook divides (or compresses) as it likes
    if (!opts_.gradient_as_bucket_view) copy_plain(view, current_grad(i).detach());
    return;
  }
  // Average as PyTorch does: multiply by 1/world on the way in, then SUM.
  if (!opts_.gradient_as_bucket_view) copy_divided(view, current_grad(i).detach(), divisor_);
  else if (!scaled_by_reduce(bucket_of_[i])) view.mul_(reciprocal_world(divisor_));
}

const BucketView& Reducer::view_of(size_t b) {
  buckets_[b].view.divisor = divisor_;
  return buckets_[b].view;
}

void Reducer::refuse_from_own_hook(const char* call) const {
  if (hook_running_)
    fail(Status::State, std::string(call) +
                            ": called from this reducer's own comm hook; a hook reduces its bucket (e.g. all_reduce "
                            "on the group it is given) and returns, and the reducer is called again once it has");
}

PendingPtr Reducer::run_hook(size_t b) {
  struct Running {
    bool& flag;
    explicit Running(bool& f) : flag(f) { flag = true; }
    ~Running() { flag = false; }
  } running(hook_running_);
  return hook_->run(group_, view_of(b));
}

void Reducer::set_sync(bool enabled) {
  refuse_from_own_hook("set_sync");
  if (enabled != sync_ && step_in_progress())
    fail(Status::State, "set_sync: a step is in progress (gradients were marked ready); call it between steps");
  sync_ = enabled;
}

void Reducer::set_comm_hook(std::shared_ptr<CommHook> hook) {
  refuse_from_own_hook("set_comm_hook");
  if (step_in_progress()) fail(Status::State, "set_comm_hook: a step is in progress; call it between steps");
  if (hook == hook_) return;
  if (hook) hook->attach(this);  // a stateful hook serving another reducer is refused here
  if (hook_) hook_->detach(this);
  hook_ = std::move(hook);
}

int Reducer::count_active(bool active) {
  at::Tensor t = at::full({1}, active ? 1 : 0, at::TensorOptions().dtype(at::kLong));
  all_reduce_blocking(group_, t, ReduceOp::Sum);
  return static_cast<int>(t.item<int64_t>());
}

void Reducer::begin_step_if_needed() {
  if (step_begun_) return;
  step_begun_ = true;
  divisor_ = group_.size();
  if (opts_.join_enabled) {
    int active = count_active(true);
    if (!opts_.divide_by_initial_world_size) divisor_ = active;
  }
}

bool Reducer::join(const std::function<void()>& each_step) {
  refuse_from_own_hook("join");
  if (!opts_.join_enabled) fail(Status::State, "join: create the reducer with join_enabled on every rank");
  if (step_in_progress()) fail(Status::State, "join: a step is in progress; finish it first");
  // Shadow the others: each of their steps is one count plus the buckets in order.
  bool shadowed = false;
  while (count_active(false) > 0) {
    shadowed = true;
    if (each_step) each_step();
    for (size_t b = 0; b < buckets_.size(); ++b) {
      buckets_[b].flat.zero_();
      if (hook_) {
        run_hook(b)->wait();
      } else {
        all_reduce_blocking(group_, buckets_[b].flat, ReduceOp::Sum);
      }
    }
  }
  return shadowed;
}

void Reducer::mark_ready(size_t i) {
  check_arg(i < grads_.size(), "mark_ready: index " + std::to_string(i) + " >= " + std::to_string(grads_.size()) +
                                   " gradients");
  refuse_from_own_hook("mark_ready");
  if (!sync_) return;  // no_sync: gradients accumulate locally
  if (opts_.static_graph) return mark_ready_static(i);
  if (ready_[i]) fail(Status::State, "mark_ready: gradient " + std::to_string(i) + " was already marked ready in this step");
  if (watch_) watch_->throw_if_failed();  // an earlier step's all-reduce, left to the device, failed
  abandon_on_failure("mark_ready", [&] {
    begin_step_if_needed();
    ready_[i] = 1;
    copy_in(i);
    Bucket& b = buckets_[bucket_of_[i]];
    if (--b.pending == 0) launch_ready_buckets();
  });
}

void Reducer::launch_ready_buckets() {
  // A broken group refuses the step here, before any hook (a custom C hook
  // does not touch the backend itself) runs on it.
  if (group_.broken()) group_.backend_for("reducer bucket");
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    Bucket& b = buckets_[next_bucket_];
    if (hook_) {
      b.work = run_hook(next_bucket_);
    } else if (in_place_step()) {
      b.work = all_reduce_parts(group_, b.parts, 1.0 / divisor_);
    } else if (scaled_by_reduce(next_bucket_)) {
      b.work = all_reduce_parts(group_, {b.flat}, 1.0 / divisor_);
    } else {
      b.work = all_reduce(group_, b.flat, ReduceOp::Sum);
    }
    ++next_bucket_;
  }
}

void Reducer::finish() {
  refuse_from_own_hook("finish");
  if (!sync_) return;
  if (!abandoned_.empty()) {
    std::string why = std::move(abandoned_);
    abandon_step("");
    fail(Status::State, "finish: this step was abandoned because an earlier call failed (" + why +
                          "); its gradients are not averaged. The next mark_ready starts a new step.");
  }
  if (opts_.static_graph) {
    if (static_steps_ == 0) {
      abandon_on_failure("finish", [&] { finish_static_first_step(); });
    } else {
      check_static_step_complete();
      abandon_on_failure("finish", [&] {
        finish_step();
        if (++static_steps_ == 2 && buckets_may_be_rebuilt()) rebuild_buckets_in_ready_order();
      });
    }
    return;
  }
  // An unready gradient is the caller's mistake, found before anything is
  // sent: the step stays open for the missing mark_ready.
  if (!opts_.find_unused_parameters) {
    std::vector<size_t> unready;
    for (size_t i = 0; i < ready_.size(); ++i)
      if (!ready_[i]) unready.push_back(i);
    if (!unready.empty())
      fail(Status::State, "finish: gradients " + list_indices(unready) +
                            " were not marked ready in this step. Mark every gradient ready, or create the "
                            "reducer with find_unused_parameters so that unused ones take part as zeros "
                            "(PyTorch: \"Expected to have finished reduction in the prior iteration\")");
  }
  abandon_on_failure("finish", [&] { finish_step(); });
}

void Reducer::finish_step() {
  begin_step_if_needed();
  std::vector<size_t> unready;
  for (size_t i = 0; i < ready_.size(); ++i)
    if (!ready_[i]) unready.push_back(i);
  if (!unready.empty()) {
    for (size_t i : unready) {
      ready_[i] = 1;
      zero_in(i);
      Bucket& b = buckets_[bucket_of_[i]];
      --b.pending;
    }
    launch_ready_buckets();
  }
  for (size_t k = 0; k < buckets_.size(); ++k) {
    auto& b = buckets_[k];
    if (!b.work) fail(Status::Internal, "finish: bucket " + std::to_string(k) + " was never started");
    if (watch_) watch_->order(std::move(b.work));  // the device waits, not the host
    else b.work->wait();
    b.work.reset();
  }
  if (in_place_step()) {
    finish_in_place_step();
  } else if (source_ && opts_.gradient_as_bucket_view) {
    // Every gradient that is not its view yet (copied in this step, or unused) becomes it.
    for (size_t i = 0; i < grads_.size(); ++i) {
      at::Tensor g = source_->gradient(i);
      if (!g.defined() || !g.is_alias_of(grads_[i])) source_->bind(i, grads_[i]);  // grads_[i]: the view
    }
  } else if (source_) {
    for (size_t i = 0; i < grads_.size(); ++i) source_->store(i, slot(i));
  } else if (!opts_.gradient_as_bucket_view) {
    for (size_t i = 0; i < grads_.size(); ++i) copy_plain(grads_[i], slot(i));
  }
  reset_step();
}

void Reducer::finish_in_place_step() {
  for (auto& b : buckets_)
    for (size_t k = 0; k < b.indices.size(); ++k) {
      const size_t i = b.indices[k];
      if (!via_slot_[i]) mark_written(b.parts[k]);  // what an in-place ATen op would have said
      else if (source_) source_->store(i, slot(i));
      else copy_plain(grads_[i], slot(i));
    }
}

// static_graph, the first step: only counts, as PyTorch's reducer does
// (its delay_all_reduce reduces everything at the end of that backward).
// Later steps: ready after as many marks as in the first; the gradients
// never marked then take part as zeros, with the step's first mark.
void Reducer::mark_ready_static(size_t i) {
  if (watch_) watch_->throw_if_failed();
  if (static_steps_ == 0) {
    ++static_marks_[i];
    return;
  }
  abandon_on_failure("mark_ready", [&] {
    if (static_left_[i] == 0)
      fail(Status::State, "static_graph: gradient " + std::to_string(i) + " was marked ready " +
                            (static_marks_[i] == 0 ? std::string("in this step but never in the first")
                                                   : "more often in this step than the " +
                                                         std::to_string(static_marks_[i]) + " time(s) of the first") +
                            ": the graph changed, which static_graph does not allow");
    begin_step_if_needed();
    mark_static_unused_ready();
    if (--static_left_[i] > 0) return;
    if (static_steps_ == 1) static_ready_order_.push_back(i);
    ready_[i] = 1;
    copy_in(i);
    --buckets_[bucket_of_[i]].pending;
    launch_ready_buckets();
  });
}

void Reducer::mark_static_unused_ready() {
  if (static_unused_marked_) return;
  static_unused_marked_ = true;
  for (size_t u : static_unused_) {
    ready_[u] = 1;
    zero_in(u);
    --buckets_[bucket_of_[u]].pending;
  }
}

void Reducer::finish_static_first_step() {
  std::vector<int> marks = static_marks_;
  static_unused_.clear();
  begin_step_if_needed();
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (marks[i] == 0) static_unused_.push_back(i);
    ready_[i] = 1;
    if (marks[i] > 0) copy_in(i);
    else zero_in(i);
    --buckets_[bucket_of_[i]].pending;
  }
  launch_ready_buckets();
  finish_step();
  static_marks_ = marks;
  static_steps_ = 1;
  reset_step();
}

void Reducer::check_static_step_complete() {
  std::vector<size_t> missing;
  for (size_t i = 0; i < static_left_.size(); ++i)
    if (static_left_[i] > 0) missing.push_back(i);
  if (missing.empty()) {
    // A step that marked nothing (every gradient is an unused one).
    abandon_on_failure("finish", [&] {
      begin_step_if_needed();
      mark_static_unused_ready();
      launch_ready_buckets();
    });
    return;
  }
  // Nothing is sent for a step whose graph changed: the step is dropped
  // and the next one starts clean.
  abandon_step("");
  abandoned_.clear();
  fail(Status::State, "finish: static_graph: gradients " + list_indices(missing) +
                          " were used in the first step but not (as often) in this one: the graph changed, which "
                          "static_graph does not allow");
}

void Reducer::rebuild_buckets_in_ready_order() {
  // PyTorch's rebuild after the second step: buckets filled in the order
  // the gradients became ready in it, the unused ones last, with rank 0's
  // order on every rank (each rank's own may differ).
  const size_t n = grads_.size();
  std::vector<size_t> order = static_ready_order_;
  order.insert(order.end(), static_unused_.begin(), static_unused_.end());
  static_ready_order_.clear();
  at::Tensor t = at::full({static_cast<int64_t>(n)}, -1, at::TensorOptions().dtype(at::kLong));
  for (size_t k = 0; k < n && k < order.size(); ++k) t.data_ptr<int64_t>()[k] = static_cast<int64_t>(order[k]);
  if (group_.device().type == DeviceType::CUDA) t = t.to(at::Device(at::kCUDA, group_.device().index));
  broadcast_blocking(group_, t, 0);
  t = t.cpu();
  std::vector<char> seen(n, 0);
  order.assign(n, 0);
  for (size_t k = 0; k < n; ++k) {
    int64_t i = t.data_ptr<int64_t>()[k];
    if (i < 0 || static_cast<size_t>(i) >= n || seen[i])
      fail(Status::Internal, "static_graph: rank 0's gradient order is not a permutation of the " + std::to_string(n) +
                                 " gradients");
    seen[i] = 1;
    order[k] = static_cast<size_t>(i);
  }
  assign_buckets(compute_bucket_assignment(infos_, bucket_caps(), order));
  reset_step();
}

void Reducer::reset_step() {
  if (opts_.static_graph) {
    if (static_steps_ == 0) std::fill(static_marks_.begin(), static_marks_.end(), 0);
    static_left_ = static_marks_;
    static_unused_marked_ = false;
  }
  step_begun_ = false;
  std::fill(ready_.begin(), ready_.end(), 0);
  in_place_ = -1;
  std::fill(via_slot_.begin(), via_slot_.end(), 0);
  in_place_spans_.clear();
  for (auto& b : buckets_) {
    b.pending = b.indices.size();
    for (auto& part : b.parts) part.reset();  // a gradient set to none is freed, not kept here
  }
  next_bucket_ = 0;
}

}  // namespace ddp::core