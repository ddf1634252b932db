#include "reducer/autograd_hooks.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/GradMode.h>

#include "common/error.h"
#include "reducer/bucket_copy.h"

namespace ddp::core {
namespace {

struct State {
  Reducer* reducer = nullptr;
  // The backward pass (autograd's graph task) whose end runs finish(): a
  // pass that failed midway never runs its callbacks, and the next one
  // must queue its own.
  int queued_for = -1;
};

class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::shared_ptr<State> state, size_t index) : state_(std::move(state)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    State& s = *state_;
    if (!s.reducer->sync()) return outputs;  // no_sync: accumulate locally
    const int pass = torch::autograd::get_current_graph_task_id();
    if (s.queued_for != pass) {
      s.queued_for = pass;
      auto state = state_;
      torch::autograd::Engine::get_default_engine().queue_callback([state] {
        state->queued_for = -1;
        state->reducer->finish();
      });
    }
    try {
      s.reducer->mark_ready(index_);
    } catch (...) {
      // This pass ends with the exception, which reports the failure: the
      // next pass starts a clean step rather than being refused for this one.
      s.queued_for = -1;
      s.reducer->drop_step();
      throw;
    }
    return outputs;
  }

 private:
  std::shared_ptr<State> state_;
  size_t index_;
};

// The parameters' .grad() as the reducer's gradients, and the hooks that
// drive it. Owned by the reducer, which destroys it first.
class AutogradGradients : public GradientSource {
 public:
  AutogradGradients(Reducer& reducer, std::vector<at::Tensor> params)
      : params_(std::move(params)), state_(std::make_shared<State>()) {
    state_->reducer = &reducer;
    for (size_t i = 0; i < params_.size(); ++i) {
      // Keep the accumulators alive: a variable holds them weakly, and a
      // recreated accumulator would not carry our hook.
      auto acc = torch::autograd::impl::grad_accumulator(params_[i]);
      hook_keys_.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(state_, i)));
      accumulators_.push_back(std::move(acc));
    }
  }
  ~AutogradGradients() override {
    for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }

  at::Tensor gradient(size_t i) override { return params_[i].grad(); }

  void store(size_t i, const at::Tensor& averaged) override {
    at::NoGradGuard no_grad;
    at::Tensor& g = params_[i].mutable_grad();
    if (g.defined()) copy_plain(g, averaged);
    else g = averaged.clone();
  }

  void bind(size_t i, const at::Tensor& bucket_view) override { params_[i].mutable_grad() = bucket_view; }

 private:
  std::vector<at::Tensor> params_;
  std::shared_ptr<State> state_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace

std::unique_ptr<Reducer> make_autograd_reducer(Group& group, std::vector<at::Tensor> params,
                                               const ReducerOptions& opts) {
  check_arg(!params.empty(), "reducer: autograd hooks need the parameters");
  std::vector<at::Tensor> shapes;  // each gradient's shape and dtype; zeros for a gradient a step lacks
  for (size_t i = 0; i < params.size(); ++i) {
    check_arg(params[i].requires_grad() && params[i].is_leaf(),
              "reducer: parameter " + std::to_string(i) + " is not a leaf tensor that requires grad");
    shapes.push_back(at::zeros_like(params[i]));
  }
  ReducerOptions o = opts;
  o.views_rebound_on_rebuild = true;  // AutogradGradients binds each .grad to its new view
  auto reducer = std::make_unique<Reducer>(group, params, std::move(shapes), o);
  reducer->set_gradient_source(std::make_unique<AutogradGradients>(*reducer, std::move(params)));
  return reducer;
}

}  // namespace ddp::core