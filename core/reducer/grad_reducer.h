// The DDP engine: gradients grouped into buckets, each bucket all-reduced
// the moment its last gradient is ready (overlapping communication with the
// rest of backward), averaged as PyTorch's reducer averages.
//
// By itself it works on gradient buffers the caller owns (a Julia, Rust,
// Java or C trainer): the caller says when gradient i is final (mark_ready)
// and when the step's backward is over (finish). A GradientSource lets it
// read and write gradients kept elsewhere: the autograd adapter
// (autograd_hooks.h) uses one for LibTorch parameters' .grad().
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "comm/collectives.h"
#include "comm/group.h"
#include "comm/stream_watch.h"
#include "hooks/comm_hook.h"
#include "reducer/bucket_assignment.h"

namespace ddp::core {

struct ReducerOptions {
  double bucket_cap_mb = 25;
  double first_bucket_mb = 1;
  bool find_unused_parameters = false;
  bool gradient_as_bucket_view = false;
  bool broadcast_parameters = true;
  // Uneven inputs (PyTorch's Join): each synchronised step starts with a
  // small all-reduce counting the ranks still training, so that ranks that
  // ran out of data can join() and shadow the others' reductions. Every rank
  // must use the same setting.
  bool join_enabled = false;
  // With join_enabled: average over the group's size, the joined ranks
  // counting as zeros (PyTorch's Join default, divide_by_initial_world_size
  // = True), rather than over the ranks still training.
  bool divide_by_initial_world_size = false;
  // PyTorch's static_graph: the first synchronised step only counts how
  // often each gradient is marked ready, and reduces every bucket at its
  // end (unmarked gradients as zeros). From then on the set of gradients and
  // their counts are fixed: the ones never marked take part as zeros without
  // being waited for, a gradient is ready once marked as often as in the
  // first step, and a step that differs is Status::State naming the
  // gradient. After the second step the buckets are rebuilt in the order
  // the gradients became ready in it (rank 0's order), the unused last.
  bool static_graph = false;
  // With gradient_as_bucket_view: whether a rebuild may move the gradients
  // to new bucket storage. Only where a GradientSource rebinds them (the
  // autograd path, as PyTorch re-points param.grad). A caller that looked
  // its views up once (ddp_reducer_gradient) keeps writing the old storage,
  // and a moved gradient was silently left out of every later average; so
  // without it the buckets keep the layout they were made with.
  bool views_rebound_on_rebuild = false;
};

// Throws Status::InvalidArgument unless both caps are sizes in MiB whose
// bytes fit in 63 bits: positive and finite (NaN, infinity and 1e300 were
// taken, the last two converted to bytes with undefined behaviour).
// PyTorch refuses those too: int(cap * 1024 * 1024) must fit its int64.
void check_bucket_caps(double first_bucket_mb, double bucket_cap_mb);

// Where a reducer finds each step's gradients and puts the averaged ones,
// when they are not the caller's fixed buffers.
class GradientSource {
 public:
  virtual ~GradientSource() = default;
  // Gradient i of this step; undefined when it has none (unused: zeros).
  virtual at::Tensor gradient(size_t i) = 0;
  // Stores averaged gradient i (a view into its bucket, overwritten by the
  // next step).
  virtual void store(size_t i, const at::Tensor& averaged) = 0;
  // gradient_as_bucket_view: gradient i becomes `bucket_view` itself, so
  // that later steps accumulate into the bucket and nothing is copied.
  virtual void bind(size_t i, const at::Tensor& bucket_view) = 0;
};

class Reducer {
 public:
  // params: what broadcast_parameters sends from rank 0 (may be empty when
  // not broadcasting). grads: the caller's gradient buffers, one per
  // parameter, contiguous; with gradient_as_bucket_view they may be
  // undefined: gradient(i) then hands out views into the buckets. With a
  // gradient source, grads only give each gradient's shape and dtype.
  Reducer(Group& group, std::vector<at::Tensor> params, std::vector<at::Tensor> grads,
          const ReducerOptions& opts);
  ~Reducer();
  // Not copied or moved: a stateful comm hook knows the reducer it serves
  // by its address (CommHook::attach).
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // A failure inside either abandons the step (buckets in flight are
  // dropped): the next finish() reports it with Status::State and resets, so
  // the step after that starts clean. On CUDA with NCCL, finish() returns
  // once the buckets' all-reduces are enqueued, without a hook: the current
  // stream waits for them (as in PyTorch's reducer), the averaged gradients
  // are ready for whatever that stream runs next, and a failure the
  // watchdog sees is reported by the next call, with its own status.
  void mark_ready(size_t index);
  void finish();
  // Drops the step in progress and any failure finish() has yet to report,
  // for a caller that has seen the failure already (autograd: the hook's
  // exception ended the backward pass, whose finish() never runs).
  void drop_step();
  // Between steps: turned off with gradients marked ready, the step would
  // stay open and the next one would find its marks.
  void set_sync(bool enabled);
  // nullptr: the built-in path (PyTorch's reducer without a hook).
  void set_comm_hook(std::shared_ptr<CommHook> hook);
  // From now on, gradients come from and go to `source` (owned here, and
  // destroyed first: it may hold hooks that call into this reducer).
  void set_gradient_source(std::unique_ptr<GradientSource> source);
  // This rank has no more data: shadow the other ranks' steps (count 0,
  // zero buckets) until every rank has joined. Needs join_enabled.
  // `each_step` runs in each shadowed step between the count and the
  // buckets (what the others do in their forward: the buffer broadcast).
  // Returns whether it shadowed any step (false: this rank joined last).
  bool join(const std::function<void()>& each_step = {});
  // With join_enabled, the step's count of ranks still training, where a
  // synchronised step begins (the strategy's forward, as PyTorch's DDP
  // counts in its forward); otherwise the first gradient's mark counts.
  void begin_synchronised_step() { begin_step_if_needed(); }
  bool sync() const { return sync_; }

  size_t size() const { return grads_.size(); }
  size_t bucket_count() const { return buckets_.size(); }
  const std::vector<size_t>& bucket_indices(size_t b) const;
  // The gradient buffer of parameter i (a bucket view with gradient_as_bucket_view).
  const at::Tensor& gradient(size_t i) const;

  // Some gradient of the current step is marked ready already.
  bool step_in_progress() const;
  // Whether this reducer's comm hook is running now: the reducer is inside
  // the call that runs it, and takes no other call until it returns.
  bool hook_running() const { return hook_running_; }

 private:
  struct Bucket {
    std::vector<size_t> indices;
    std::vector<int64_t> offsets;  // element offset of each gradient in `flat`
    at::Tensor flat;
    size_t pending = 0;
    PendingPtr work;
    BucketView view;  // what a hook gets, built once (its divisor is set at each launch)
    // In a step reduced in place: each gradient, or its slot in `flat`.
    std::vector<at::Tensor> parts;
    // `flat` is a shared bucket the backend can all-reduce with a scale.
    bool shared_scalable = false;
  };

  const at::Tensor& slot(size_t i) const;  // gradient i's place in its bucket
  void copy_in(size_t i);
  void zero_in(size_t i);  // an unused gradient: zeros take its place
  // Whether this step reduces the gradients where they lie (decided at the
  // step's first gradient): no hook, no bucket views, and a backend that
  // all-reduces several tensors as one (collectives.h: all_reduce_parts).
  // Then no gradient is copied into its bucket nor back out, except those
  // that cannot be reduced where they are (unused, another layout), which
  // go through their slot.
  bool in_place_step();
  void take_in_place(size_t i);
  void claim_span(const at::Tensor& g, size_t i);  // refuses a gradient over another's bytes
  void finish_in_place_step();
  void bind_in(size_t i, at::Tensor view);  // gradient_as_bucket_view with a source
  // Whether bucket b's reduce scales the gradients itself (by 1/divisor as
  // it reads each rank's values): with no hook, in a shared bucket, where
  // that has PyTorch's bits (below). Then they enter the bucket unscaled,
  // and the pass that would divide them in place is saved.
  bool scaled_by_reduce(size_t b) const;
  void launch_ready_buckets();
  void reset_step();
  void begin_step_if_needed();      // the join count, once per synchronised step
  int count_active(bool active);    // the join all-reduce
  const BucketView& view_of(size_t b);  // with this step's divisor
  void abandon_step(const std::string& why);
  void finish_step();
  template <typename F> void abandon_on_failure(const char* op, F&& body);
  void check_no_aliasing() const;
  // Every rank must build the same buckets, or their all-reduces pair up
  // different gradients: compared once, here, over the group, before any
  // bucket exists (shared buckets are made by every rank together).
  void check_layout_matches_across_ranks(const BucketAssignment& assignment);
  // [first_bucket_mb, bucket_cap_mb] in bytes.
  std::vector<size_t> bucket_caps() const;
  bool buckets_may_be_rebuilt() const;  // see ReducerOptions::views_rebound_on_rebuild
  // Makes buckets_ (and the indices into them) of `assignment`.
  void assign_buckets(const BucketAssignment& assignment);
  // With gradient_as_bucket_view: whether the buckets go to the backend's
  // shared memory (it has some, every gradient is on the CPU), so that
  // backward writes the gradients straight where the peers read them.
  bool wants_shared_buckets();
  // static_graph
  void mark_ready_static(size_t i);
  void mark_static_unused_ready();
  void finish_static_first_step();
  void check_static_step_complete();
  void rebuild_buckets_in_ready_order();

  // The gradient of parameter i for this step: the caller's buffer, or the
  // source's (zeros when it has none).
  at::Tensor current_grad(size_t i);

  Group& group_;
  std::vector<at::Tensor> grads_;
  std::unique_ptr<GradientSource> source_;
  ReducerOptions opts_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, position_in_bucket_;
  std::vector<at::Tensor> slots_;  // slot(i), made by assign_buckets
  std::vector<char> ready_;
  size_t next_bucket_ = 0;  // buckets launch strictly in order: every rank issues the same collectives
  bool sync_ = true;
  bool step_begun_ = false;
  int divisor_ = 1;  // ranks averaged over in this step
  std::string abandoned_;  // why the last step was abandoned, until finish() reports it
  std::shared_ptr<CommHook> hook_;
  bool hook_running_ = false;
  // Runs the hook on bucket b, marked as running meanwhile.
  PendingPtr run_hook(size_t b);
  // A call made from inside the hook (a custom C hook calling back into its
  // reducer) is refused: the step it would change is the one running it.
  void refuse_from_own_hook(const char* call) const;
  std::vector<TensorInfo> infos_;  // each gradient's bytes, dtype and device
  bool shared_buckets_ = false;  // assign_buckets asks the backend for shared buckets
  bool parts_possible_ = false;  // every gradient is of a dtype the backend all-reduces in parts
  int in_place_ = -1;            // in_place_step(): -1 until this step decides
  std::vector<char> via_slot_;   // in such a step: gradient i went through its slot
  std::map<uintptr_t, std::pair<uintptr_t, size_t>> in_place_spans_;  // begin -> end, gradient
  // static_graph: synchronised steps finished, how often each gradient was
  // marked in the first, how often still to come in this step, those never
  // marked, whether this step marked them already, and the order gradients
  // became ready in the second step.
  int64_t static_steps_ = 0;
  std::vector<int> static_marks_, static_left_;
  std::vector<size_t> static_unused_, static_ready_order_;
  bool static_unused_marked_ = false;
  // CUDA on NCCL only; declared last, so that it is destroyed (waiting for
  // what is still in flight) before the buckets.
  std::unique_ptr<StreamWatch> watch_;
};

}  // namespace ddp::core