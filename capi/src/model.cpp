// Modules, optimizers and losses: argument checks, then core/model and ATen.
#include "ddp/model.h"

#include <ATen/ops/mul.h>

#include "checkpoint/torch_archive.h"
#include "handles.h"
#include "model/losses.h"
#include "model/optimizer.h"
#include "model/param_groups.h"
#include "model/script_module.h"

using namespace ddp::capi;

ddp_module::~ddp_module() = default;
ddp_optimizer::~ddp_optimizer() = default;

namespace {

ddp_status make_optimizer(ddp_optimizer** out, ddp_module* m, const char* fn,
                          const std::function<ddp::core::OptimizerSpec()>& spec) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* mod = require(m, "module");
    auto h = std::make_unique<ddp_optimizer>();
    h->optimizer = ddp::core::Optimizer::make(spec(), mod->module->parameters());
    hand_out(out, std::move(h));
  });
}

std::optional<double> inherited(double v) {
  if (v == DDP_INHERIT) return std::nullopt;
  return v;
}

std::vector<ddp::core::ParamGroupSelector> selectors_of(const ddp_param_group* groups, size_t n, const char* fn) {
  if (!groups || n == 0) fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": no param groups given");
  std::vector<ddp::core::ParamGroupSelector> out;
  for (size_t i = 0; i < n; ++i) {
    const ddp_param_group& g = groups[i];
    if (g.version != DDP_PARAM_GROUP_VERSION)
      fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": param group " + std::to_string(i) + " has unknown version " +
                                       std::to_string(g.version));
    if (g.num_patterns > 0 && !g.patterns)
      fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": param group " + std::to_string(i) + ": patterns is NULL");
    ddp::core::ParamGroupSelector s;
    for (size_t k = 0; k < g.num_patterns; ++k) {
      if (!g.patterns[k])
        fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": param group " + std::to_string(i) + ": pattern " +
                                         std::to_string(k) + " is NULL");
      s.patterns.emplace_back(g.patterns[k]);
    }
    s.lr = inherited(g.lr);
    s.weight_decay = inherited(g.weight_decay);
    s.momentum = inherited(g.momentum);
    out.push_back(std::move(s));
  }
  return out;
}

ddp_status make_grouped_optimizer(ddp_optimizer** out, ddp_module* m, const ddp_param_group* groups, size_t n,
                                  const char* fn, const std::function<ddp::core::OptimizerSpec()>& spec) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* mod = require(m, "module");
    auto selected = ddp::core::select_param_groups(mod->module->named_parameters(), selectors_of(groups, n, fn));
    auto h = std::make_unique<ddp_optimizer>();
    h->optimizer = ddp::core::Optimizer::make(spec(), selected);
    hand_out(out, std::move(h));
  });
}

ddp::core::OptimizerSpec sgd_spec(const ddp_sgd_options* opts) {
  const ddp_sgd_options o = opts ? *opts : ddp_sgd_options DDP_SGD_OPTIONS_INIT;
  if (o.version != DDP_SGD_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_optimizer_new_sgd: unknown options version " + std::to_string(o.version));
  ddp::core::OptimizerSpec s;
  s.kind = ddp::core::OptimizerSpec::Kind::Sgd;
  s.lr = o.lr;
  s.momentum = o.momentum;
  s.dampening = o.dampening;
  s.weight_decay = o.weight_decay;
  s.nesterov = o.nesterov != 0;
  return s;
}

ddp::core::OptimizerSpec adam_spec(const ddp_adam_options* opts, ddp::core::OptimizerSpec::Kind kind,
                                   const ddp_adam_options& defaults, const char* fn) {
  const ddp_adam_options& o = opts ? *opts : defaults;
  if (o.version != DDP_ADAM_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, std::string(fn) + ": unknown options version " + std::to_string(o.version));
  ddp::core::OptimizerSpec s;
  s.kind = kind;
  s.lr = o.lr;
  s.beta1 = o.beta1;
  s.beta2 = o.beta2;
  s.eps = o.eps;
  s.weight_decay = o.weight_decay;
  s.amsgrad = o.amsgrad != 0;
  return s;
}

ddp::core::LossSpec loss_spec(const ddp_loss_options& o) {
  using Spec = ddp::core::LossSpec;
  if (o.version != DDP_LOSS_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_loss_compute: unknown options version " + std::to_string(o.version));
  if (o.kind < DDP_LOSS_MSE || o.kind > DDP_LOSS_KL_DIV)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_loss_compute: loss kind " + std::to_string(static_cast<int>(o.kind)) + " is unknown");
  if (o.reduction < DDP_REDUCTION_MEAN || o.reduction > DDP_REDUCTION_BATCHMEAN)
    fail(DDP_E_INVALID_ARGUMENT,
         "ddp_loss_compute: reduction " + std::to_string(static_cast<int>(o.reduction)) + " is unknown");
  Spec s;
  s.kind = static_cast<Spec::Kind>(o.kind);
  s.reduction = static_cast<Spec::Reduction>(o.reduction);
  if (o.weight) s.weight = require(o.weight, "weight")->t;
  if (o.pos_weight) s.pos_weight = require(o.pos_weight, "pos_weight")->t;
  s.ignore_index = o.ignore_index;
  s.label_smoothing = o.label_smoothing;
  s.beta = o.beta;
  s.delta = o.delta;
  s.log_target = o.log_target != 0;
  return s;
}

ddp_status loss(const ddp_loss_options& opts, const ddp_tensor* input, const ddp_tensor* target, ddp_tensor** out,
                const char* fn) {
  if (!out) return invalid(std::string(fn) + ": out is NULL");
  *out = nullptr;
  return fence([&] {
    hand_out(out, wrap_tensor(ddp::core::compute_loss(loss_spec(opts), require(input, "input")->t,
                                                      require(target, "target")->t)));
  });
}

}  // namespace

extern "C" {

ddp_status ddp_module_load(ddp_module** out, const char* path) {
  if (!out) return invalid("ddp_module_load: out is NULL");
  *out = nullptr;
  if (!path) return invalid("ddp_module_load: path is NULL");
  return fence([&] {
    auto h = std::make_unique<ddp_module>();
    h->module = ddp::core::ScriptModule::load(path);
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_module_from_tensors(ddp_module** out, const char* const* names, ddp_tensor* const* tensors,
                                   const int* is_buffer, size_t n) {
  if (!out) return invalid("ddp_module_from_tensors: out is NULL");
  *out = nullptr;
  if (n > 0 && (!names || !tensors)) return invalid("ddp_module_from_tensors: names or tensors is NULL");
  return fence([&] {
    std::vector<ddp::core::NamedTensor> params, buffers;
    for (size_t i = 0; i < n; ++i) {
      if (!names[i]) fail(DDP_E_INVALID_ARGUMENT, "ddp_module_from_tensors: name " + std::to_string(i) + " is NULL");
      const at::Tensor& t = require(tensors[i], ("tensor '" + std::string(names[i]) + "'").c_str())->t;
      (is_buffer && is_buffer[i] ? buffers : params).push_back({names[i], t});
    }
    auto h = std::make_unique<ddp_module>();
    h->module = ddp::core::ScriptModule::from_tensors(params, buffers);
    hand_out(out, std::move(h));
  });
}

ddp_status ddp_module_forward(ddp_module* m, const ddp_tensor* input, ddp_tensor** out) {
  if (!out) return invalid("ddp_module_forward: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* mod = require(m, "module");
    hand_out(out, wrap_tensor(mod->module->forward(require(input, "input")->t)));
  });
}

ddp_status ddp_module_call(ddp_module* m, const char* method, const ddp_tensor* const* inputs, size_t num_inputs,
                           ddp_outputs** out) {
  return ddp_module_call_v2(m, method, inputs, num_inputs, nullptr, nullptr, 0, out);
}

ddp_status ddp_module_call_v2(ddp_module* m, const char* method, const ddp_tensor* const* inputs, size_t num_inputs,
                              const char* const* kw_names, const ddp_tensor* const* kw_values, size_t num_kw,
                              ddp_outputs** out) {
  if (!out) return invalid("ddp_module_call: out is NULL");
  *out = nullptr;
  return fence([&] {
    auto* mod = require(m, "module");
    hand_out(out, wrap_outputs(mod->module->call(method ? method : "forward", tensors_of(inputs, num_inputs),
                                                 keywords_of(kw_names, kw_values, num_kw))));
  });
}

size_t ddp_outputs_count(const ddp_outputs* o) {
  auto* h = live(o);
  return h ? h->outputs.tensors.size() : 0;
}

ddp_status ddp_outputs_at(const ddp_outputs* o, size_t index, ddp_tensor** out) {
  if (!out) return invalid("ddp_outputs_at: out is NULL");
  *out = nullptr;
  return fence([&] {
    const auto& t = require(o, "outputs")->outputs.tensors;
    ddp::core::check_arg(index < t.size(), "ddp_outputs_at: index " + std::to_string(index) + " is past the " +
                                               std::to_string(t.size()) + " outputs");
    hand_out(out, wrap_tensor(t[index]));
  });
}

ddp_status ddp_outputs_get(const ddp_outputs* o, const char* key, ddp_tensor** out) {
  if (!out) return invalid("ddp_outputs_get: out is NULL");
  *out = nullptr;
  if (!key) return invalid("ddp_outputs_get: key is NULL");
  return fence([&] {
    const auto& r = require(o, "outputs")->outputs;
    ddp::core::check_arg(!r.keys.empty() || r.tensors.empty(),
                         std::string("ddp_outputs_get: the output is not a dict, so it has no key '") + key + "'");
    std::string have;
    for (size_t i = 0; i < r.keys.size(); ++i) {
      if (r.keys[i] == key) return hand_out(out, wrap_tensor(r.tensors[i]));
      have += (i ? ", '" : "'") + r.keys[i] + "'";
    }
    fail(DDP_E_INVALID_ARGUMENT, std::string("ddp_outputs_get: the output has no key '") + key + "' (it has " +
                                     (have.empty() ? "none" : have) + ")");
  });
}

const char* ddp_outputs_key(const ddp_outputs* o, size_t index) {
  auto* h = live(o);
  return h && index < h->outputs.keys.size() ? h->outputs.keys[index].c_str() : nullptr;
}

void ddp_outputs_free(ddp_outputs* o) { release(o); }

ddp_status ddp_module_grad(const ddp_module* m, const char* name, ddp_tensor** out) {
  if (!out) return invalid("ddp_module_grad: out is NULL");
  *out = nullptr;
  if (!name) return invalid("ddp_module_grad: name is NULL");
  return fence([&] {
    at::Tensor g = require(m, "module")->module->grad(name);
    if (g.defined()) hand_out(out, wrap_tensor(g.contiguous()));
  });
}

ddp_status ddp_module_train(ddp_module* m, int on) {
  return fence([&] { require(m, "module")->module->train(on != 0); });
}

size_t ddp_module_num_parameters(const ddp_module* m) {
  auto* h = live(m);
  return h ? h->module->parameters().size() : 0;
}

void ddp_module_free(ddp_module* m) { release(m); }

ddp_status ddp_module_save(const ddp_module* m, const char* path) {
  if (!path) return invalid("ddp_module_save: path is NULL");
  return fence([&] { require(m, "module")->module->save(path); });
}

size_t ddp_module_state_count(const ddp_module* m) {
  auto* h = live(m);
  return h ? h->module->state().size() : 0;
}

ddp_status ddp_module_state_name(const ddp_module* m, size_t index, const char** name, int* is_parameter) {
  if (!name) return invalid("ddp_module_state_name: name is NULL");
  *name = nullptr;
  return fence([&] {
    auto* h = const_cast<ddp_module*>(require(m, "module"));
    // The names are kept on the handle, so the pointers stay valid as long as it.
    if (h->names.empty()) {
      size_t params = h->module->parameters().size();
      for (const auto& t : h->module->state()) {
        h->is_parameter.push_back(h->names.size() < params);
        h->names.push_back(t.name);
      }
    }
    ddp::core::check_arg(index < h->names.size(), "ddp_module_state_name: index " + std::to_string(index) +
                                                      " is past the module's " + std::to_string(h->names.size()) +
                                                      " entries");
    *name = h->names[index].c_str();
    if (is_parameter) *is_parameter = h->is_parameter[index] ? 1 : 0;
  });
}

ddp_status ddp_module_get(const ddp_module* m, const char* name, ddp_tensor** out) {
  if (!out) return invalid("ddp_module_get: out is NULL");
  *out = nullptr;
  if (!name) return invalid("ddp_module_get: name is NULL");
  return fence([&] { hand_out(out, wrap_tensor(require(m, "module")->module->get(name))); });
}

ddp_status ddp_module_set(ddp_module* m, const char* name, const ddp_tensor* value) {
  if (!name) return invalid("ddp_module_set: name is NULL");
  return fence([&] {
    auto* h = require(m, "module");
    h->module->set(name, require(value, "value")->t);
  });
}

ddp_status ddp_module_save_state_dict(const ddp_module* m, const char* path) {
  if (!path) return invalid("ddp_module_save_state_dict: path is NULL");
  return fence([&] { ddp::core::save_state_dict_file(path, require(m, "module")->module->state()); });
}

ddp_status ddp_module_load_state_dict(ddp_module* m, const char* path, int strict) {
  if (!path) return invalid("ddp_module_load_state_dict: path is NULL");
  return fence([&] {
    auto* h = require(m, "module");
    auto saved = ddp::core::load_state_dict_file(path);
    if (strict) h->module->check_no_extra(saved, path);
    h->module->load_state(saved, path);
  });
}

ddp_status ddp_module_load_state_dict_nonstrict(ddp_module* m, const char* path, ddp_buffer** skipped) {
  if (skipped) *skipped = nullptr;
  if (!path) return invalid("ddp_module_load_state_dict_nonstrict: path is NULL");
  return fence([&] {
    auto* h = require(m, "module");
    auto result = h->module->load_state_nonstrict(ddp::core::load_state_dict_file(path), path);
    if (!skipped) return;
    std::string text;
    for (const auto& n : result.missing) text += "missing " + n + "\n";
    for (const auto& n : result.unexpected) text += "unexpected " + n + "\n";
    auto b = std::make_unique<ddp_buffer>();
    b->bytes.assign(text.begin(), text.end());
    hand_out(skipped, std::move(b));
  });
}

ddp_status ddp_optimizer_new_sgd(ddp_optimizer** out, ddp_module* m, const ddp_sgd_options* opts) {
  return make_optimizer(out, m, "ddp_optimizer_new_sgd", [&] { return sgd_spec(opts); });
}

ddp_status ddp_optimizer_new_adam(ddp_optimizer** out, ddp_module* m, const ddp_adam_options* opts) {
  return make_optimizer(out, m, "ddp_optimizer_new_adam", [&] {
    return adam_spec(opts, ddp::core::OptimizerSpec::Kind::Adam, ddp_adam_options DDP_ADAM_OPTIONS_INIT,
                     "ddp_optimizer_new_adam");
  });
}

ddp_status ddp_optimizer_new_adamw(ddp_optimizer** out, ddp_module* m, const ddp_adam_options* opts) {
  return make_optimizer(out, m, "ddp_optimizer_new_adamw", [&] {
    return adam_spec(opts, ddp::core::OptimizerSpec::Kind::AdamW, ddp_adam_options DDP_ADAMW_OPTIONS_INIT,
                     "ddp_optimizer_new_adamw");
  });
}

ddp_status ddp_optimizer_new_sgd_groups(ddp_optimizer** out, ddp_module* m, const ddp_sgd_options* opts,
                                        const ddp_param_group* groups, size_t num_groups) {
  return make_grouped_optimizer(out, m, groups, num_groups, "ddp_optimizer_new_sgd_groups",
                                [&] { return sgd_spec(opts); });
}

ddp_status ddp_optimizer_new_adam_groups(ddp_optimizer** out, ddp_module* m, const ddp_adam_options* opts,
                                         const ddp_param_group* groups, size_t num_groups) {
  return make_grouped_optimizer(out, m, groups, num_groups, "ddp_optimizer_new_adam_groups", [&] {
    return adam_spec(opts, ddp::core::OptimizerSpec::Kind::Adam, ddp_adam_options DDP_ADAM_OPTIONS_INIT,
                     "ddp_optimizer_new_adam_groups");
  });
}

ddp_status ddp_optimizer_new_adamw_groups(ddp_optimizer** out, ddp_module* m, const ddp_adam_options* opts,
                                          const ddp_param_group* groups, size_t num_groups) {
  return make_grouped_optimizer(out, m, groups, num_groups, "ddp_optimizer_new_adamw_groups", [&] {
    return adam_spec(opts, ddp::core::OptimizerSpec::Kind::AdamW, ddp_adam_options DDP_ADAMW_OPTIONS_INIT,
                     "ddp_optimizer_new_adamw_groups");
  });
}

ddp_status ddp_optimizer_from_torch(ddp_optimizer** out, void* torch_optimizer) {
  if (!out) return invalid("ddp_optimizer_from_torch: out is NULL");
  *out = nullptr;
  if (!torch_optimizer) return invalid("ddp_optimizer_from_torch: torch_optimizer is NULL");
  return fence([&] {
    auto h = std::make_unique<ddp_optimizer>();
    h->optimizer = ddp::core::Optimizer::borrow(*static_cast<torch::optim::Optimizer*>(torch_optimizer));
    hand_out(out, std::move(h));
  });
}

size_t ddp_optimizer_num_groups(const ddp_optimizer* opt) {
  auto* h = live(opt);
  return h ? h->optimizer->num_groups() : 0;
}

ddp_status ddp_optimizer_group_lr(const ddp_optimizer* opt, size_t group, double* out) {
  if (!out) return invalid("ddp_optimizer_group_lr: out is NULL");
  return fence([&] { *out = require(opt, "optimizer")->optimizer->group_lr(group); });
}

ddp_status ddp_optimizer_set_group_lr(ddp_optimizer* opt, size_t group, double lr) {
  return fence([&] {
    auto* h = require(opt, "optimizer");
    ddp::core::check_arg(lr >= 0, "ddp_optimizer_set_group_lr: lr " + std::to_string(lr) + " is not a number >= 0");
    h->optimizer->set_group_lr(group, lr);
  });
}

ddp_status ddp_optimizer_lr(const ddp_optimizer* opt, double* out) {
  if (!out) return invalid("ddp_optimizer_lr: out is NULL");
  return fence([&] { *out = require(opt, "optimizer")->optimizer->lr(); });
}

ddp_status ddp_optimizer_set_lr(ddp_optimizer* opt, double lr) {
  return fence([&] {
    auto* h = require(opt, "optimizer");
    ddp::core::check_arg(lr >= 0, "ddp_optimizer_set_lr: lr " + std::to_string(lr) + " is not a number >= 0");
    h->optimizer->set_lr(lr);
  });
}

ddp_status ddp_optimizer_zero_grad(ddp_optimizer* opt) {
  return fence([&] { require(opt, "optimizer")->optimizer->zero_grad(); });
}

void ddp_optimizer_free(ddp_optimizer* opt) { release(opt); }

ddp_status ddp_loss_mse(const ddp_tensor* input, const ddp_tensor* target, ddp_tensor** out) {
  return loss(ddp_loss_options DDP_LOSS_OPTIONS_INIT(DDP_LOSS_MSE), input, target, out, "ddp_loss_mse");
}

ddp_status ddp_loss_cross_entropy(const ddp_tensor* input, const ddp_tensor* target, ddp_tensor** out) {
  return loss(ddp_loss_options DDP_LOSS_OPTIONS_INIT(DDP_LOSS_CROSS_ENTROPY), input, target, out,
              "ddp_loss_cross_entropy");
}

ddp_status ddp_loss_options_init(ddp_loss_options* opts, unsigned int version, ddp_loss_kind kind) {
  // The kind is checked after what every init function checks (NULL, the version).
  if (opts && version == DDP_LOSS_OPTIONS_VERSION && (kind < DDP_LOSS_MSE || kind > DDP_LOSS_KL_DIV))
    return invalid("ddp_loss_options_init: unknown kind " + std::to_string(static_cast<int>(kind)));
  return init_options(opts, version, DDP_LOSS_OPTIONS_VERSION, ddp_loss_options DDP_LOSS_OPTIONS_INIT(kind),
                      "ddp_loss_options_init");
}

ddp_status ddp_loss_compute(const ddp_loss_options* opts, const ddp_tensor* input, const ddp_tensor* target,
                            ddp_tensor** out) {
  if (!opts) {
    if (out) *out = nullptr;
    return invalid("ddp_loss_compute: opts is NULL (DDP_LOSS_OPTIONS_INIT(kind) names the loss)");
  }
  return loss(*opts, input, target, out, "ddp_loss_compute");
}

ddp_status ddp_loss_scale(const ddp_tensor* loss, double factor, ddp_tensor** out) {
  if (!out) return invalid("ddp_loss_scale: out is NULL");
  *out = nullptr;
  return fence([&] { hand_out(out, wrap_tensor(at::mul(require(loss, "loss")->t, factor))); });
}

}  // extern "C"
