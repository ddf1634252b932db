// A TorchScript module (torch::jit::load) as the strategy trains it: its
// parameters for the optimizer and the DDP engine, its state (parameters and
// buffers, by name) for broadcasting and checkpoints, and forward.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "common/types.h"

namespace torch::jit {
struct Module;
}

namespace ddp::core {

// What a module's method returned, as tensors: one tensor; a tuple or list
// of tensors (by index); or a dict from strings to tensors (by key, in the
// dict's order; `keys` is empty otherwise).
struct ModuleOutputs {
  std::vector<at::Tensor> tensors;
  std::vector<std::string> keys;
};

// The one tensor of `out`; Status::InvalidArgument naming `who` when the
// method returned several, or a dict (read those with call()).
at::Tensor single_output(const ModuleOutputs& out, const std::string& who);

class ScriptModule {
 public:
  // Throws Status::IO naming the path when it is not a loadable TorchScript file.
  static std::unique_ptr<ScriptModule> load(const std::string& path);
  // A model the caller owns and runs itself (a LibTorch torch::nn::Module,
  // JavaCPP's or tch-rs's tensors): its dotted-name parameters and buffers,
  // shared, not copied, held as a module without methods, so that the
  // strategy sets it up, synchronises and checkpoints it as it does a
  // TorchScript module, under the same names a Python module with the same
  // attributes has. Status::InvalidArgument naming an undefined tensor, a
  // name given twice or that is also another's prefix ("fc" and
  // "fc.weight"), an empty name part, or a parameter that is not a leaf.
  static std::unique_ptr<ScriptModule> from_tensors(const std::vector<NamedTensor>& parameters,
                                                    const std::vector<NamedTensor>& buffers);
  // Made by from_tensors: it has no methods, and it is never moved or cast
  // (the caller's tensors are the model).
  bool caller_owned() const;
  ~ScriptModule();

  // An input on another device than the module's is moved there first (a
  // batch built on the host, as Lightning's batch_to_device moves it).
  at::Tensor forward(const at::Tensor& input);
  // The module's method `method` ("forward", or any other the module
  // exports) on `inputs`, each moved to the module's device.
  // Status::InvalidArgument naming a method the module does not have, an
  // input count outside what the method takes (its defaults fill the
  // rest), the module's own refusal of an input, or an output that is not
  // one of ModuleOutputs' shapes.
  // `keywords`: inputs by the method's argument names (Python's keyword
  // arguments); TorchScript's matching names an unknown or missing one.
  ModuleOutputs call(const std::string& method, const std::vector<at::Tensor>& inputs,
                     const std::vector<NamedTensor>& keywords = {});
  void train(bool on);
  void to(Device device);
  // Casts the floating-point parameters and buffers to `dtype` (a true
  // half precision); later inputs are cast to it by the caller.
  void to(at::ScalarType dtype);

  // Lets `rewrite` change the module's TorchScript methods. It works on a
  // copy of the module's types and methods that shares its tensors, which
  // then replaces the module: an executor made by an earlier run keeps no
  // graph from before, and other modules of the same types are untouched.
  void rewrite(const std::function<void(torch::jit::Module&)>& rewrite);

  // The trainable parameters, in registration order (the same on every rank).
  std::vector<at::Tensor> parameters() const;
  // The parameters with their dotted names, in the same order.
  std::vector<NamedTensor> named_parameters() const;
  // The buffers (running statistics and the like), in registration order.
  std::vector<at::Tensor> buffers() const;
  // Parameters, then buffers, each with its dotted name.
  std::vector<NamedTensor> state() const;
  // `source` names where `saved` came from (a file's path) in the errors
  // below: "module state from <source>: ...".
  // Status::IO naming the first name of this module's state that `saved`
  // lacks, or differs in shape or dtype (both sides' named).
  void check_state(const std::vector<NamedTensor>& saved, const std::string& source) const;
  // Copies `saved` into this module's state, after check_state: on a
  // mismatch nothing is changed.
  void load_state(const std::vector<NamedTensor>& saved, const std::string& source);
  // Status::IO naming the first entry of `saved` this module does not have
  // (PyTorch's "unexpected key" of a strict load_state_dict).
  void check_no_extra(const std::vector<NamedTensor>& saved, const std::string& source) const;
  // PyTorch's load_state_dict(strict=False): copies the entries of `saved`
  // this module has; Status::IO naming one with another shape or dtype
  // (then nothing changes). Returns what was skipped.
  struct Skipped {
    std::vector<std::string> missing;     // the module's, not in `saved`
    std::vector<std::string> unexpected;  // in `saved`, not the module's
  };
  Skipped load_state_nonstrict(const std::vector<NamedTensor>& saved, const std::string& source);

  // One parameter or buffer by its dotted name: the module's own tensor
  // (detached; it shares the memory). Status::InvalidArgument naming an
  // unknown name.
  at::Tensor get(const std::string& name) const;
  // The gradient of parameter `name` (undefined when it has none).
  // Status::InvalidArgument naming an unknown parameter.
  at::Tensor grad(const std::string& name) const;
  // Copies `value` into the parameter or buffer `name` (onto its device).
  // Status::InvalidArgument naming the name and both shapes or dtypes when
  // they differ; nothing changes then.
  void set(const std::string& name, const at::Tensor& value);

  // The module as a TorchScript archive (what torch.jit.save writes) at
  // `path`, written atomically. Status::IO naming the path on failure.
  void save(const std::string& path) const;

 private:
  struct Impl;
  explicit ScriptModule(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp::core
