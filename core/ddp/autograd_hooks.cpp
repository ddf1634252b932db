#include "ddp/autograd_hooks.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "ddp/grad_reducer.h"

namespace ddp {
namespace {

struct State {
  Reducer* reducer = nullptr;
  bool callback_queued = false;
};

class ReadyHook : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::shared_ptr<State> state, size_t index) : state_(std::move(state)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    State& s = *state_;
    if (!s.reducer->sync()) return outputs;  // no_sync: accumulate locally
    if (!s.callback_queued) {
      s.callback_queued = true;
      auto state = state_;
      torch::autograd::Engine::get_default_engine().queue_callback([state] {
        state->callback_queued = false;
        state->reducer->finish();
      });
    }
    s.reducer->mark_ready(index_);
    return outputs;
  }

 private:
  std::shared_ptr<State> state_;
  size_t index_;
};

class Hooks : public AutogradHooks {
 public:
  Hooks(Reducer& reducer, const std::vector<at::Tensor>& params) : state_(std::make_shared<State>()) {
    state_->reducer = &reducer;
    for (size_t i = 0; i < params.size(); ++i) {
      // Keep the accumulators alive: a variable holds them weakly, and a
      // recreated accumulator would not carry our hook.
      auto acc = torch::autograd::impl::grad_accumulator(params[i]);
      hook_keys_.push_back(acc->add_post_hook(std::make_unique<ReadyHook>(state_, i)));
      accumulators_.push_back(std::move(acc));
    }
  }
  ~Hooks() override {
    for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }

 private:
  std::shared_ptr<State> state_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace

std::unique_ptr<AutogradHooks> make_autograd_hooks(Reducer& reducer, const std::vector<at::Tensor>& params) {
  return std::make_unique<Hooks>(reducer, params);
}

}  // namespace ddp
