#include "strategy/sync_batchnorm.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/library.h>

#include <map>
#include <mutex>

#include "comm/sync_batch_norm.h"
#include "common/error.h"
#include "model/script_module.h"

namespace ddp::core {
namespace {

constexpr const char* kOp = "ddp::sync_batch_norm";

// The groups converted modules are bound to, by the id their graphs hold.
std::mutex bindings_mutex;
std::map<int64_t, std::shared_ptr<Group>>& bindings() {
  static auto* m = new std::map<int64_t, std::shared_ptr<Group>>();  // never destroyed: ops may run at exit
  return *m;
}
int64_t next_id = 1;

std::shared_ptr<Group> bound_group(int64_t id) {
  std::lock_guard<std::mutex> lock(bindings_mutex);
  auto it = bindings().find(id);
  if (it == bindings().end())
    fail(Status::State, "sync_batchnorm: this module's strategy was torn down; a synchronised batch norm can only "
                        "train while its strategy is set up (eval needs none)");
  return it->second;
}

at::Tensor sync_batch_norm_op(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                              const std::optional<at::Tensor>& bias, const std::optional<at::Tensor>& running_mean,
                              const std::optional<at::Tensor>& running_var, bool training, double momentum, double eps,
                              bool cudnn_enabled, int64_t group) {
  if (!training)
    return at::batch_norm(input, weight, bias, running_mean, running_var, false, momentum, eps, cudnn_enabled);
  auto value = [](const std::optional<at::Tensor>& t) { return t ? *t : at::Tensor(); };
  try {
    return sync_batch_norm(bound_group(group), input, value(weight), value(bias), value(running_mean),
                           value(running_var), momentum, eps);
  } catch (const Error& e) {
    parked_error = e;  // a timeout or a dead peer keeps its status past the interpreter
    throw;
  }
}

// Replaces the aten::batch_norm nodes of `block` (and of the blocks inside
// it); an earlier ddp::sync_batch_norm is bound to `id` again.
int rewrite_block(torch::jit::Block* block, torch::jit::Graph& graph, int64_t id) {
  static const auto batch_norm = c10::Symbol::fromQualString("aten::batch_norm");
  static const auto synced = c10::Symbol::fromQualString(kOp);
  int count = 0;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    torch::jit::Node* n = *it++;
    for (torch::jit::Block* b : n->blocks()) count += rewrite_block(b, graph, id);
    if (n->kind() != batch_norm && n->kind() != synced) continue;
    torch::jit::WithInsertPoint here(n);
    torch::jit::Node* r = graph.create(synced, 1);
    for (size_t i = 0; i < 9; ++i) r->addInput(n->input(i));  // batch_norm's nine arguments
    r->addInput(graph.insertConstant(id));
    r->insertBefore(n);
    r->output()->setType(n->output()->type());
    n->output()->replaceAllUsesWith(r->output());
    n->destroy();
    ++count;
  }
  return count;
}

}  // namespace

TORCH_LIBRARY(ddp, m) {
  m.def("sync_batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "bool training, float momentum, float eps, bool cudnn_enabled, int group) -> Tensor");
}
TORCH_LIBRARY_IMPL(ddp, CompositeImplicitAutograd, m) { m.impl("sync_batch_norm", &sync_batch_norm_op); }

SyncBatchNormBinding::SyncBatchNormBinding(std::shared_ptr<Group> group) {
  std::lock_guard<std::mutex> lock(bindings_mutex);
  id_ = next_id++;
  bindings()[id_] = std::move(group);
}

SyncBatchNormBinding::~SyncBatchNormBinding() {
  std::lock_guard<std::mutex> lock(bindings_mutex);
  bindings().erase(id_);
}

int convert_sync_batchnorm(ScriptModule& module, const SyncBatchNormBinding& binding) {
  int count = 0;
  module.rewrite([&](torch::jit::Module& m) {
    // A scripted BatchNorm calls F.batch_norm, and its parent calls the
    // BatchNorm's forward: inlined, each method's graph holds the
    // aten::batch_norm it runs. Instances of one type share their methods,
    // so each graph is rewritten once; the count is of the layers the root
    // module's forward runs through.
    std::vector<torch::jit::Graph*> done;
    for (const auto& sub : m.modules())
      for (const auto& method : sub.get_methods()) {
        auto graph = method.graph();
        if (std::find(done.begin(), done.end(), graph.get()) != done.end()) continue;
        done.push_back(graph.get());
        torch::jit::Inline(*graph);
        int replaced = rewrite_block(graph->block(), *graph, binding.id());
        if (sub._ivalue() == m._ivalue() && method.name() == "forward") count = replaced;
      }
  });
  return count;
}

}  // namespace ddp::core
