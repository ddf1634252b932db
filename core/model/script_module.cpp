#include "model/script_module.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/script.h>

#include <map>

#include "comm/failure.h"
#include "common/error.h"
#include "tensor/tensors.h"

namespace ddp::core {

struct ScriptModule::Impl {
  torch::jit::Module module;
  at::Device device{at::kCPU};  // where to() put it
};

ScriptModule::ScriptModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ScriptModule::~ScriptModule() = default;

std::unique_ptr<ScriptModule> ScriptModule::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->module = torch::jit::load(path);
  } catch (const c10::Error& e) {
    fail(Status::IO, "module " + path + ": not a loadable TorchScript file: " + e.what_without_backtrace());
  }
  return std::unique_ptr<ScriptModule>(new ScriptModule(std::move(impl)));
}

at::Tensor ScriptModule::forward(const at::Tensor& input) {
  c10::IValue out;
  // TorchScript's optimising executor turns the graph into differentiable
  // subgraphs with its own symbolic backward (relu's as a mask product, for
  // one); run as recorded instead, each op is the eager op with autograd's
  // own backward, as the Python model trains. Measured with
  // bench_strategy_step in one process with the host cache: the conv net
  // 16.9 ms optimised against 15.2 ms as recorded, the MLP 35-38 against
  // 34-36 ms. (Without the host cache the MLP as recorded pays more page
  // faults: 50 against 35 ms.) The flag is thread-local; the guard sets it
  // for this call only.
  torch::jit::GraphOptimizerEnabledGuard as_recorded(false);
  parked_error.reset();
  try {
    out = impl_->module.forward({input.device() == impl_->device ? input : input.to(impl_->device)});
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    // A libddp operator in the graph failed (a collective's timeout, a
    // dead peer): its own error, with its status.
    if (parked_error) {
      Error original = *parked_error;
      parked_error.reset();
      throw original;
    }
    // The module refused this input (its shape or dtype): the caller's to
    // fix. TorchScript's message is a traceback; its last line says why.
    std::string what = short_what(e);
    while (!what.empty() && what.back() == '\n') what.pop_back();
    auto nl = what.rfind('\n');
    fail(Status::InvalidArgument, "module forward: " + (nl == std::string::npos ? what : what.substr(nl + 1)));
  }
  check_arg(out.isTensor(), "module forward: the module returned a " + out.tagKind() + ", not a tensor");
  return out.toTensor();
}

void ScriptModule::train(bool on) { impl_->module.train(on); }

void ScriptModule::to(Device device) {
  at::Device d = to_aten_device(device);
  impl_->module.to(d);
  impl_->device = d;
}

void ScriptModule::to(at::ScalarType dtype) { impl_->module.to(dtype); }

void ScriptModule::rewrite(const std::function<void(torch::jit::Module&)>& rewrite) {
  torch::jit::Module copy = impl_->module.clone(/*inplace=*/true);
  rewrite(copy);
  impl_->module = copy;
}

std::vector<at::Tensor> ScriptModule::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& p : impl_->module.parameters()) out.push_back(p);
  return out;
}

std::vector<at::Tensor> ScriptModule::buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& b : impl_->module.buffers()) out.push_back(b);
  return out;
}

std::vector<NamedTensor> ScriptModule::state() const {
  std::vector<NamedTensor> out;
  for (const auto& p : impl_->module.named_parameters()) out.push_back({p.name, p.value});
  for (const auto& b : impl_->module.named_buffers()) out.push_back({b.name, b.value});
  return out;
}

namespace {
std::map<std::string, at::Tensor> by_name(const std::vector<NamedTensor>& saved) {
  std::map<std::string, at::Tensor> out;
  for (const auto& s : saved) out[s.name] = s.tensor;
  return out;
}
}  // namespace

void ScriptModule::check_state(const std::vector<NamedTensor>& saved) const {
  auto have = by_name(saved);
  for (const auto& m : state()) {
    auto it = have.find(m.name);
    if (it == have.end()) fail(Status::IO, "module state: '" + m.name + "' is missing from the saved state");
    if (it->second.sizes() != m.tensor.sizes() || it->second.scalar_type() != m.tensor.scalar_type())
      fail(Status::IO, "module state: '" + m.name + "' was saved with another shape or dtype");
  }
}

void ScriptModule::load_state(const std::vector<NamedTensor>& saved) {
  check_state(saved);
  auto have = by_name(saved);
  at::NoGradGuard no_grad;
  for (const auto& m : state()) m.tensor.copy_(have[m.name]);
}

}  // namespace ddp::core
