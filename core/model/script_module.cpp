#include "model/script_module.h"

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/script.h>

#include <ext/stdio_filebuf.h>
#include <istream>
#include <map>

#include "checkpoint/torch_archive.h"
#include "comm/failure.h"
#include "common/error.h"
#include "common/regular_file.h"
#include "tensor/tensors.h"

namespace ddp::core {

struct ScriptModule::Impl {
  torch::jit::Module module;
  // The module as loaded, before any rewrite (sync_batchnorm's operator is
  // libddp's, which PyTorch cannot load): what save exports. It shares the
  // parameters and buffers with `module`.
  std::optional<torch::jit::Module> as_loaded;
  at::Device device{at::kCPU};  // where to() put it
  bool caller_owned = false;     // from_tensors
};

ScriptModule::ScriptModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

namespace {

// "fc1.weight" -> {"fc1", "weight"}; an empty part is refused.
std::vector<std::string> name_parts(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    check_arg(!parts.back().empty(), "model: the name '" + name + "' has an empty part");
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// A submodule's class name: TorchScript wants identifiers, and Sequential's
// children are named 0, 1, ...
std::string class_path(const std::vector<std::string>& parts, size_t n) {
  std::string path = "__torch__.libddp.caller_model";
  for (size_t i = 0; i < n; ++i) path += ".m_" + parts[i];
  return path;
}

}  // namespace

std::unique_ptr<ScriptModule> ScriptModule::from_tensors(const std::vector<NamedTensor>& parameters,
                                                         const std::vector<NamedTensor>& buffers) {
  auto impl = std::make_unique<Impl>();
  impl->module = torch::jit::Module(c10::QualifiedName(class_path({}, 0)));
  impl->caller_owned = true;
  std::map<std::string, bool> leaves;  // every full name, and whether it is a tensor (else a submodule)
  const NamedTensor* first_placed = nullptr;  // the tensor whose device the others must share
  auto add = [&](const NamedTensor& t, bool is_buffer) {
    const std::string what = is_buffer ? "buffer" : "parameter";
    check_arg(t.tensor.defined(), "model: " + what + " '" + t.name + "' is undefined");
    check_arg(is_buffer || t.tensor.is_leaf(),
              "model: parameter '" + t.name + "' is not a leaf tensor (the result of an operation, not a weight)");
    // Broadcasts, buckets and checkpoints read every tensor's memory on the
    // module's one device: a meta tensor has none, and one elsewhere would
    // fail later, in a collective on some ranks, instead of here.
    if (!first_placed) first_placed = &t;
    check_arg(t.tensor.device() == first_placed->tensor.device(),
              "model: " + what + " '" + t.name + "' is on " + t.tensor.device().str() + " but '" +
                  first_placed->name + "' is on " + first_placed->tensor.device().str() +
                  "; a model's tensors live on one device (move them there before making the model)");
    check_arg(!t.tensor.is_meta(), "model: " + what + " '" + t.name + "' is on the meta device (it has no data)");
    auto parts = name_parts(t.name);
    torch::jit::Module at = impl->module;
    std::string prefix;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      prefix += (i ? "." : "") + parts[i];
      auto seen = leaves.find(prefix);
      check_arg(seen == leaves.end() || !seen->second,
                "model: '" + prefix + "' is a tensor and also holds '" + t.name + "'");
      if (seen == leaves.end()) {
        at.register_module(parts[i], torch::jit::Module(c10::QualifiedName(class_path(parts, i + 1))));
        leaves[prefix] = false;
      }
      at = at.attr(parts[i]).toModule();
    }
    check_arg(!leaves.count(t.name), "model: the name '" + t.name + "' is given twice, or is also a submodule's");
    leaves[t.name] = true;
    at.register_parameter(parts.back(), t.tensor, is_buffer);
  };
  for (const auto& p : parameters) add(p, false);
  for (const auto& b : buffers) add(b, true);
  auto first = !parameters.empty() ? parameters.front().tensor : !buffers.empty() ? buffers.front().tensor : at::Tensor();
  if (first.defined()) impl->device = first.device();
  return std::unique_ptr<ScriptModule>(new ScriptModule(std::move(impl)));
}

bool ScriptModule::caller_owned() const { return impl_->caller_owned; }
ScriptModule::~ScriptModule() = default;

std::unique_ptr<ScriptModule> ScriptModule::load(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  // torch::jit::load's own open blocks for good on a FIFO (regular_file.h):
  // it reads through the descriptor checked here instead, so the path
  // cannot be swapped for one in between. The stream, as the path, lets it
  // tell a zip archive from a flatbuffer one.
  std::string why;
  const int fd = open_regular_file(path, &why);
  if (fd < 0) fail(Status::IO, "module " + path + ": " + why);
  __gnu_cxx::stdio_filebuf<char> file(fd, std::ios::in | std::ios::binary);  // closes fd
  std::istream in(&file);
  try {
    impl->module = torch::jit::load(in);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Not only c10::Error: a damaged archive whose code does not parse
    // throws the TorchScript compiler's ErrorReport, and one whose pickle
    // names what is not there std::out_of_range (found by loading 5,010
    // damaged copies of a saved module, the zip's CRCs mended or not).
    fail_from_aten(Status::IO, "module " + path + ": not a loadable TorchScript file", e);
  }
  return std::unique_ptr<ScriptModule>(new ScriptModule(std::move(impl)));
}

namespace {

std::string type_of(const c10::IValue& v) { return v.isNone() ? "None" : v.type()->str(); }

// The tensors of what a method returned (see ModuleOutputs).
ModuleOutputs flatten_outputs(const c10::IValue& out, const std::string& method) {
  ModuleOutputs r;
  auto element = [&](const c10::IValue& v, const std::string& where) {
    check_arg(v.isTensor(), "module " + method + ": output " + where + " is a " + type_of(v) + ", not a tensor");
    r.tensors.push_back(v.toTensor());
  };
  if (out.isTensor()) {
    r.tensors.push_back(out.toTensor());
  } else if (out.isTuple() || out.isList()) {
    const auto elems = out.isTuple() ? out.toTupleRef().elements().vec() : out.toListRef().vec();
    for (size_t i = 0; i < elems.size(); ++i) element(elems[i], std::to_string(i));
  } else if (out.isGenericDict()) {
    for (const auto& kv : out.toGenericDict()) {
      check_arg(kv.key().isString(),
                "module " + method + ": the output is a dict keyed by " + type_of(kv.key()) + ", not by strings");
      r.keys.push_back(kv.key().toStringRef());
      element(kv.value(), "'" + r.keys.back() + "'");
    }
  } else {
    fail(Status::InvalidArgument, "module " + method + ": the module returned a " + type_of(out) +
                                      ", not a tensor, a tuple, list or string-keyed dict of tensors");
  }
  return r;
}

}  // namespace

at::Tensor single_output(const ModuleOutputs& out, const std::string& who) {
  check_arg(out.tensors.size() == 1 && out.keys.empty(),
            who + ": the module returned " + std::to_string(out.tensors.size()) +
                " tensors, not one (read several outputs with the multi-output forward)");
  return out.tensors[0];
}

ModuleOutputs ScriptModule::call(const std::string& method, const std::vector<at::Tensor>& inputs,
                                 const std::vector<NamedTensor>& keywords) {
  auto m = impl_->module.find_method(method);
  check_arg(m.has_value(), "module: no method named '" + method + "'");
  // The schema's first argument is self; the defaults may fill the tail.
  const auto& args = m->function().getSchema().arguments();
  const size_t takes = args.empty() ? 0 : args.size() - 1;
  size_t required = takes;
  while (required > 0 && args[required].default_value()) --required;
  // With keywords, TorchScript's own matching names what is missing or unknown.
  check_arg(inputs.size() <= takes && (!keywords.empty() || inputs.size() >= required),
            "module " + method + ": " + std::to_string(inputs.size()) + " inputs given, the method takes " +
                (required == takes ? std::to_string(takes) : std::to_string(required) + " to " + std::to_string(takes)));
  auto on_device = [&](const at::Tensor& t, const std::string& what) {
    check_arg(t.defined(), "module " + method + ": " + what + " is undefined");
    return t.device() == impl_->device ? t : t.to(impl_->device);
  };
  std::vector<c10::IValue> stack;
  stack.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) stack.emplace_back(on_device(inputs[i], "input " + std::to_string(i)));
  torch::jit::Kwargs kwargs;
  for (const auto& k : keywords) {
    check_arg(!kwargs.count(k.name), "module " + method + ": keyword '" + k.name + "' is given twice");
    size_t at = 1;
    while (at < args.size() && args[at].name() != k.name) ++at;
    if (at == args.size()) {
      std::string names;
      for (size_t i = 1; i < args.size(); ++i) names += (i > 1 ? ", " : "") + args[i].name();
      fail(Status::InvalidArgument, "module " + method + ": no argument named '" + k.name + "' (it takes " +
                                        (names.empty() ? "none" : names) + ")");
    }
    check_arg(at > inputs.size(), "module " + method + ": argument '" + k.name + "' is given by position and by keyword");
    kwargs[k.name] = on_device(k.tensor, "keyword '" + k.name + "'");
  }
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
    out = (*m)(std::move(stack), kwargs);
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
    fail(Status::InvalidArgument, "module " + method + ": " + (nl == std::string::npos ? what : what.substr(nl + 1)));
  }
  return flatten_outputs(out, method);
}

at::Tensor ScriptModule::forward(const at::Tensor& input) {
  return single_output(call("forward", {input}), "module forward");
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
  if (!impl_->as_loaded) impl_->as_loaded = impl_->module;
  impl_->module = copy;
}

std::vector<at::Tensor> ScriptModule::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& p : impl_->module.parameters()) out.push_back(p);
  return out;
}

std::vector<NamedTensor> ScriptModule::named_parameters() const {
  std::vector<NamedTensor> out;
  for (const auto& p : impl_->module.named_parameters()) out.push_back({p.name, p.value});
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

// Status::IO where the saved value of `mine` has another shape or dtype
// (PyTorch's "size mismatch for ...").
void check_fits(const NamedTensor& mine, const at::Tensor& saved, const std::string& source) {
  if (saved.sizes() == mine.tensor.sizes() && saved.scalar_type() == mine.tensor.scalar_type()) return;
  fail(Status::IO, "module state from " + source + ": '" + mine.name + "' was saved with shape " +
                       c10::str(saved.sizes()) + " " + c10::toString(saved.scalar_type()) + ", the module has " +
                       c10::str(mine.tensor.sizes()) + " " + c10::toString(mine.tensor.scalar_type()));
}
}  // namespace

void ScriptModule::check_state(const std::vector<NamedTensor>& saved, const std::string& source) const {
  auto have = by_name(saved);
  for (const auto& m : state()) {
    auto it = have.find(m.name);
    if (it == have.end()) fail(Status::IO, "module state from " + source + ": '" + m.name + "' is missing from it");
    check_fits(m, it->second, source);
  }
}

void ScriptModule::check_no_extra(const std::vector<NamedTensor>& saved, const std::string& source) const {
  auto mine = by_name(state());
  for (const auto& s : saved)
    if (!mine.count(s.name))
      fail(Status::IO, "module state from " + source + ": '" + s.name + "' is not a parameter or buffer of this module");
}

at::Tensor ScriptModule::get(const std::string& name) const {
  for (const auto& t : state())
    if (t.name == name) return t.tensor.detach();
  fail(Status::InvalidArgument, "module: no parameter or buffer named '" + name + "'");
}

at::Tensor ScriptModule::grad(const std::string& name) const {
  for (const auto& p : impl_->module.named_parameters())
    if (p.name == name) return p.value.grad();
  fail(Status::InvalidArgument, "module: no parameter named '" + name + "'");
}

void ScriptModule::set(const std::string& name, const at::Tensor& value) {
  check_arg(value.defined(), "module: the value for '" + name + "' is undefined");
  at::Tensor target = get(name);
  check_arg(value.sizes() == target.sizes(), "module: '" + name + "' has shape " + c10::str(target.sizes()) +
                                                 ", the value " + c10::str(value.sizes()));
  check_arg(value.scalar_type() == target.scalar_type(), "module: '" + name + "' is " +
                                                             c10::toString(target.scalar_type()) + ", the value " +
                                                             c10::toString(value.scalar_type()));
  at::NoGradGuard no_grad;
  target.copy_(value);
}

void ScriptModule::save(const std::string& path) const {
  check_arg(!impl_->caller_owned, "module " + path + ": a model given as tensors has no TorchScript code to export; "
                                  "save its state dict (ddp_module_save_state_dict) or a checkpoint");
  write_file_atomically(path, [&](const ByteSink& sink) {
    ArchiveSink out(sink);
    try {
      torch::jit::ExportModule(impl_->as_loaded ? *impl_->as_loaded : impl_->module, out.writer());
    } catch (const std::exception& e) {
      out.rethrow_failure();  // the file's own failure first: it may have caused this one
      fail(Status::IO, "module " + path + ": cannot be saved: " + short_what(e));
    }
    out.rethrow_failure();
  });
}

ScriptModule::Skipped ScriptModule::load_state_nonstrict(const std::vector<NamedTensor>& saved,
                                                         const std::string& source) {
  auto have = by_name(saved);
  auto mine = by_name(state());
  Skipped skipped;
  for (const auto& m : state()) {
    auto it = have.find(m.name);
    if (it == have.end()) skipped.missing.push_back(m.name);
    else check_fits(m, it->second, source);
  }
  for (const auto& s : saved)
    if (!mine.count(s.name)) skipped.unexpected.push_back(s.name);
  at::NoGradGuard no_grad;
  for (const auto& m : state()) {
    auto it = have.find(m.name);
    if (it != have.end()) m.tensor.copy_(it->second);
  }
  return skipped;
}

void ScriptModule::load_state(const std::vector<NamedTensor>& saved, const std::string& source) {
  check_state(saved, source);
  auto have = by_name(saved);
  at::NoGradGuard no_grad;
  for (const auto& m : state()) m.tensor.copy_(have[m.name]);
}

}  // namespace ddp::core
