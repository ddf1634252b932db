#include "checkpoint/lightning_checkpoint.h"

#include <caffe2/serialize/read_adapter_interface.h>

#include <ATen/ops/from_blob.h>
#include <ATen/ops/scalar_tensor.h>

#include <cstring>

#include "checkpoint/checkpoint_error.h"
#include "common/error.h"

namespace ddp::core {
namespace {

using Dict = c10::impl::GenericDict;
Dict new_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }
c10::impl::GenericList new_list() { return c10::impl::GenericList(c10::AnyType::get()); }

// Lightning's progress counters: {ready, completed[, started, processed]}.
Dict counts(int64_t n, bool started_processed) {
  Dict d = new_dict();
  d.insert("ready", n);
  d.insert("completed", n);
  if (started_processed) {
    d.insert("started", n);
    d.insert("processed", n);
  }
  return d;
}
Dict progress(int64_t total, int64_t current, bool started_processed) {
  Dict d = new_dict();
  d.insert("total", counts(total, started_processed));
  d.insert("current", counts(current, started_processed));
  return d;
}
Dict batch_progress(int64_t total, int64_t current, bool last) {
  Dict d = progress(total, current, true);
  d.insert("is_last_batch", last);
  return d;
}
Dict idle_loop() {
  Dict d = new_dict();
  d.insert("state_dict", new_dict());
  d.insert("batch_progress", batch_progress(0, 0, false));
  return d;
}

// The fit loop as Lightning leaves it at the end of an epoch, resumed at
// the start of the next one.
Dict loops(const LightningCheckpoint& c) {
  const int64_t per_epoch_steps = c.epoch > 0 ? c.global_step / c.epoch : 0;
  const int64_t batches = c.batches_in_epoch > 0 ? c.batches_in_epoch : per_epoch_steps;
  const int64_t schedulers = c.lr_schedulers.empty() ? 0 : c.epoch;
  Dict fit = new_dict();
  fit.insert("state_dict", new_dict());
  Dict epoch_state = new_dict();
  epoch_state.insert("_batches_that_stepped", c.global_step);
  fit.insert("epoch_loop.state_dict", epoch_state);
  fit.insert("epoch_loop.batch_progress", batch_progress(batches * c.epoch, batches, c.epoch > 0));
  fit.insert("epoch_loop.scheduler_progress", progress(schedulers, schedulers > 0 ? 1 : 0, false));
  fit.insert("epoch_loop.automatic_optimization.state_dict", new_dict());
  Dict optimizer = new_dict();
  optimizer.insert("step", progress(c.global_step, per_epoch_steps, false));
  Dict zero_grad = new_dict();
  Dict zt = counts(c.global_step, false), zc = counts(per_epoch_steps, false);
  zt.insert("started", c.global_step);
  zc.insert("started", per_epoch_steps);
  zero_grad.insert("total", zt);
  zero_grad.insert("current", zc);
  optimizer.insert("zero_grad", zero_grad);
  Dict optim_progress = new_dict();
  optim_progress.insert("optimizer", optimizer);
  fit.insert("epoch_loop.automatic_optimization.optim_progress", optim_progress);
  fit.insert("epoch_loop.manual_optimization.state_dict", new_dict());
  fit.insert("epoch_loop.manual_optimization.optim_step_progress", progress(0, 0, false));
  fit.insert("epoch_loop.val_loop.state_dict", new_dict());
  fit.insert("epoch_loop.val_loop.batch_progress", batch_progress(0, 0, false));
  fit.insert("epoch_progress", progress(c.epoch, c.epoch, true));
  Dict all = new_dict();
  all.insert("fit_loop", fit);
  all.insert("validate_loop", idle_loop());
  all.insert("test_loop", idle_loop());
  Dict predict = new_dict();
  predict.insert("state_dict", new_dict());
  predict.insert("batch_progress", progress(0, 0, true));
  all.insert("predict_loop", predict);
  return all;
}

const at::Tensor* find(const std::vector<NamedTensor>& v, const std::string& name) {
  for (const auto& t : v)
    if (t.name == name) return &t.tensor;
  return nullptr;
}

// GradScaler.state_dict(), with the scaler's defaults for what libddp's
// scaler keeps fixed.
Dict scaler_state(const std::vector<NamedTensor>& p) {
  Dict d = new_dict();
  const at::Tensor* scale = find(p, "scale");
  const at::Tensor* tracker = find(p, "growth_tracker");
  d.insert("scale", scale ? scale->to(at::kDouble).item<double>() : 65536.0);
  d.insert("growth_factor", 2.0);
  d.insert("backoff_factor", 0.5);
  d.insert("growth_interval", static_cast<int64_t>(2000));
  d.insert("_growth_tracker", tracker ? tracker->to(at::kLong).item<int64_t>() : 0);
  return d;
}

int64_t integer(const Dict& d, const char* key, const std::string& name) {
  auto it = d.find(key);
  if (it == d.end()) bad_checkpoint(name, std::string("it lacks '") + key + "' (not a Lightning checkpoint)");
  if (!it->value().isInt()) bad_checkpoint(name, std::string("'") + key + "' is a " + it->value().tagKind() + ", not an int");
  return it->value().toInt();
}

std::vector<c10::IValue> list_of(const Dict& d, const char* key, const std::string& name) {
  std::vector<c10::IValue> out;
  auto it = d.find(key);
  if (it == d.end()) return out;
  if (!it->value().isList()) bad_checkpoint(name, std::string("'") + key + "' is not a list");
  for (const auto& v : it->value().toListRef()) out.push_back(v);
  return out;
}

// libddp's format-1 file, in the new shape: the module's names as saved
// (no LightningModule prefix), the optimizer's "<index>.<buffer>" entries
// as a torch.optim state (no param_groups: the optimizer keeps its own).
LightningCheckpoint from_format_one(const Checkpoint& old) {
  LightningCheckpoint c;
  c.epoch = old.epoch;
  c.global_step = old.step;
  c.user = old.user;
  Dict state(c10::IntType::get(), c10::AnyType::get());
  bool has_optimizer = false;
  for (const auto& t : old.tensors) {
    auto take = [&](const char* prefix) {
      size_t n = std::strlen(prefix);
      return t.name.compare(0, n, prefix) == 0 ? std::optional<std::string>(t.name.substr(n)) : std::nullopt;
    };
    if (auto m = take("module.")) {
      c.state_dict.push_back({*m, t.tensor});
    } else if (auto o = take("optimizer.")) {
      has_optimizer = true;
      auto dot = o->find('.');
      int64_t index = -1;
      try {
        index = std::stoll(o->substr(0, dot));
      } catch (...) {
      }
      if (dot == std::string::npos || index < 0) fail(Status::IO, "optimizer state: entry '" + *o + "' does not name a parameter");
      if (!state.contains(index)) state.insert(index, new_dict());
      state.at(index).toGenericDict().insert(o->substr(dot + 1), t.tensor);
    } else if (auto p = take("MixedPrecision.")) {
      c.precision.push_back({*p, t.tensor});
    }
  }
  if (has_optimizer) {
    Dict o = new_dict();
    o.insert("state", state);
    o.insert("param_groups", new_list());
    c.optimizer_states.push_back(o);
  }
  return c;
}

}  // namespace

void write_lightning_checkpoint(const LightningCheckpoint& c, const ByteSink& sink) {
  Dict root = new_dict();
  root.insert("epoch", c.epoch);
  root.insert("global_step", c.global_step);
  root.insert("pytorch-lightning_version", std::string(kLightningLayoutVersion));
  Dict state = new_dict();
  for (const auto& t : c.state_dict) state.insert(t.name, t.tensor.detach());
  root.insert("state_dict", state);
  root.insert("loops", loops(c));
  root.insert("callbacks", new_dict());
  auto optimizers = new_list();
  for (const auto& o : c.optimizer_states) optimizers.push_back(o);
  root.insert("optimizer_states", optimizers);
  auto schedulers = new_list();
  for (const auto& s : c.lr_schedulers) schedulers.push_back(s);
  root.insert("lr_schedulers", schedulers);
  if (!c.precision.empty()) root.insert("MixedPrecision", scaler_state(c.precision));
  Dict own = new_dict();
  own.insert("format", static_cast<int64_t>(2));
  own.insert("batches_in_epoch", c.batches_in_epoch);
  own.insert("samples_in_epoch", c.samples_in_epoch);
  if (c.world_size > 0) own.insert("world_size", c.world_size);
  std::vector<uint8_t> user = c.user;
  own.insert("user", at::from_blob(user.data(), {static_cast<int64_t>(user.size())}, at::kByte).clone());
  if (!c.comm_hook_state.isNone()) own.insert("comm_hook", c.comm_hook_state);
  if (!c.rng_states.isNone()) own.insert("rng_states", c.rng_states);
  if (c.averager_step >= 0) own.insert("model_averager_step", c.averager_step);
  root.insert("libddp", own);
  write_torch_archive(root, sink);
}

LightningCheckpoint read_lightning_checkpoint(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in,
                                              const std::string& name) {
  char head[8] = {};
  size_t got = in->size() >= sizeof(head) ? in->read(0, head, sizeof(head), "the file's magic") : 0;
  if (got == sizeof(head) && std::memcmp(head, "DDPCKPT", 8) == 0) {
    std::vector<uint8_t> bytes(in->size());
    if (in->read(0, bytes.data(), bytes.size(), "the checkpoint") != bytes.size()) bad_checkpoint(name, "it could not be read whole");
    return from_format_one(decode_checkpoint(bytes, name));
  }
  if (!looks_like_torch_archive(head, got))
    bad_checkpoint(name, "neither a torch.save file nor a libddp checkpoint (truncated, damaged, or foreign)");
  c10::IValue root = read_torch_archive(in, name);
  if (!root.isGenericDict()) bad_checkpoint(name, "it holds a " + root.tagKind() + ", not a checkpoint dict");
  const Dict& d = root.toGenericDict();
  LightningCheckpoint c;
  c.epoch = integer(d, "epoch", name);
  c.global_step = integer(d, "global_step", name);
  auto sd = d.find("state_dict");
  if (sd == d.end() || !sd->value().isGenericDict()) bad_checkpoint(name, "it has no state_dict dict");
  for (const auto& e : sd->value().toGenericDict()) {
    if (is_attributes_entry(e.key(), e.value())) continue;
    if (!e.key().isString() || !e.value().isTensor()) bad_checkpoint(name, "its state_dict holds an entry that is not a named tensor");
    c.state_dict.push_back({e.key().toStringRef(), e.value().toTensor()});
  }
  c.optimizer_states = list_of(d, "optimizer_states", name);
  c.lr_schedulers = list_of(d, "lr_schedulers", name);
  auto mp = d.find("MixedPrecision");
  if (mp != d.end()) {
    if (!mp->value().isGenericDict()) bad_checkpoint(name, "'MixedPrecision' is not a dict");
    const Dict& s = mp->value().toGenericDict();
    auto scale = s.find("scale");
    auto tracker = s.find("_growth_tracker");
    if (scale == s.end() || tracker == s.end() || !(scale->value().isDouble() || scale->value().isInt()) ||
        !tracker->value().isInt())
      bad_checkpoint(name, "'MixedPrecision' is not a GradScaler state (scale, _growth_tracker)");
    double v = scale->value().isDouble() ? scale->value().toDouble() : static_cast<double>(scale->value().toInt());
    c.precision.push_back({"scale", at::scalar_tensor(v, at::kFloat)});
    c.precision.push_back({"growth_tracker", at::scalar_tensor(tracker->value().toInt(), at::kInt)});
  }
  auto own = d.find("libddp");
  if (own != d.end() && own->value().isGenericDict()) {
    const Dict& o = own->value().toGenericDict();
    auto user = o.find("user");
    if (user != o.end()) {
      if (!user->value().isTensor() || user->value().toTensor().scalar_type() != at::kByte ||
          user->value().toTensor().dim() != 1)
        bad_checkpoint(name, "libddp's 'user' entry is not a byte tensor");
      at::Tensor u = user->value().toTensor().contiguous();
      c.user.assign(u.data_ptr<uint8_t>(), u.data_ptr<uint8_t>() + u.numel());
    }
    auto b = o.find("batches_in_epoch");
    if (b != o.end() && b->value().isInt()) c.batches_in_epoch = b->value().toInt();
    for (auto [key, field] : {std::pair<const char*, int64_t*>{"samples_in_epoch", &c.samples_in_epoch},
                              std::pair<const char*, int64_t*>{"world_size", &c.world_size}}) {
      auto v = o.find(key);
      if (v == o.end()) continue;
      if (!v->value().isInt() || v->value().toInt() < 0) bad_checkpoint(name, std::string("libddp's '") + key + "' is not a count");
      *field = v->value().toInt();
    }
    auto hook = o.find("comm_hook");
    if (hook != o.end()) c.comm_hook_state = hook->value();
    auto rng = o.find("rng_states");
    if (rng != o.end()) {
      if (!rng->value().isList()) bad_checkpoint(name, "libddp's 'rng_states' is not a list of the ranks' states");
      for (const auto& r : rng->value().toListRef())
        if (!r.isTensor() || r.toTensor().scalar_type() != at::kByte || r.toTensor().dim() != 1)
          bad_checkpoint(name, "libddp's 'rng_states' holds something other than a byte tensor");
      c.rng_states = rng->value();
    }
    auto avg = o.find("model_averager_step");
    if (avg != o.end()) {
      if (!avg->value().isInt() || avg->value().toInt() < 0 || avg->value().toInt() > kMostSteps)
        bad_checkpoint(name, "libddp's 'model_averager_step' is not a step count (0 to 2^62)");
      c.averager_step = avg->value().toInt();
    }
  }
  return c;
}

}  // namespace ddp::core
