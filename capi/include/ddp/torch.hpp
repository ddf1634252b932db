/**
 * @file torch.hpp
 * @brief Header-only C++ convenience for programs that use LibTorch
 *        themselves: PyTorch-style DistributedDataParallel over the C API.
 *
 *   ddp::DistributedDataParallel ddp(group, model->parameters());
 *   loss.backward();          // gradients are averaged when this returns
 *   optimizer.step();
 *   { auto guard = ddp.no_sync(); loss2.backward(); }   // accumulate locally
 *
 * Or Lightning's whole DDPStrategy (strategy.h) over a torch::nn::Module and
 * the caller's own torch::optim optimizer:
 *
 *   ddp::Strategy strategy;                     // the cluster found, the group joined
 *   strategy.setup(*net);                       // rank 0's weights and buffers everywhere
 *   torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
 *   strategy.add_optimizer(opt);                // its state goes into checkpoints
 *   auto out = strategy.forward(*net, [&] { return net->forward(x); });
 *   strategy.backward(loss);                    // gradients averaged as they become ready
 *   strategy.optimizer_step(opt);               // unscale, clip, step (or skip on inf)
 *   strategy.save_checkpoint("last.ckpt", info);  // torch.load and Lightning open it
 *
 * Everything goes through the C ABI (ddp_tensor_from_aten, ddp_reducer_*,
 * ddp_strategy_*); only this header needs LibTorch's headers, and the
 * caller's LibTorch must be libddp's (checked: ddp_torch_check_version).
 */
#ifndef DDP_TORCH_HPP
#define DDP_TORCH_HPP

#include <ATen/core/Tensor.h>
#include <torch/version.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ddp/ddp.h"

namespace torch {
namespace optim {
class Optimizer;
}  // namespace optim
}  // namespace torch

namespace ddp {

/** Thrown by this header when a libddp call fails. */
class error : public std::runtime_error {
 public:
  error(ddp_status s, const std::string& what) : std::runtime_error(what), status(s) {}
  ddp_status status;
};

inline void check(ddp_status s, const char* what) {
  if (s != DDP_OK) throw error(s, std::string(what) + ": " + ddp_last_error_message());
}

/** Throws ddp::error when this program's LibTorch is not one whose objects libddp can take by address. */
inline void check_torch_version() {
#ifdef TORCH_VERSION
  check(ddp_torch_check_version(TORCH_VERSION), "ddp_torch_check_version");
#else  // LibTorch before the TORCH_VERSION string
#define DDP_TORCH_STR_(x) #x
#define DDP_TORCH_STR(x) DDP_TORCH_STR_(x)
  check(ddp_torch_check_version(DDP_TORCH_STR(TORCH_VERSION_MAJOR) "." DDP_TORCH_STR(TORCH_VERSION_MINOR)),
        "ddp_torch_check_version");
#endif
}

class DistributedDataParallel {
 public:
  /**
   * @param group    borrowed, must outlive this object.
   * @param params   the module's parameters (leaf tensors that require grad).
   * @param opts     reducer options (autograd_hooks is set here).
   * @param buffers  the module's buffers (e.g. BatchNorm statistics): rank 0's
   *                 are broadcast at creation when opts.broadcast_parameters is
   *                 on, as PyTorch DDP does.
   */
  DistributedDataParallel(ddp_group* group, const std::vector<at::Tensor>& params,
                          ddp_reducer_options opts = ddp_reducer_options DDP_REDUCER_OPTIONS_INIT,
                          const std::vector<at::Tensor>& buffers = {}) {
    check_torch_version();
    opts.autograd_hooks = 1;
    if (opts.broadcast_parameters) {
      for (const auto& b : buffers) {
        ddp_tensor* h = nullptr;
        check(ddp_tensor_from_aten(&h, &b), "ddp_tensor_from_aten");
        ddp_status s = ddp_broadcast(group, h, 0);
        ddp_tensor_free(h);
        check(s, "broadcast of a module buffer");
      }
    }
    std::vector<ddp_tensor*> handles;
    try {
      for (const auto& p : params) {
        ddp_tensor* h = nullptr;
        check(ddp_tensor_from_aten(&h, &p), "ddp_tensor_from_aten");
        handles.push_back(h);
      }
      check(ddp_reducer_new(&reducer_, group, handles.data(), nullptr, handles.size(), &opts), "ddp_reducer_new");
    } catch (...) {
      for (auto* h : handles) ddp_tensor_free(h);
      throw;
    }
    for (auto* h : handles) ddp_tensor_free(h);
  }
  ~DistributedDataParallel() { ddp_reducer_free(reducer_); }
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /** RAII no_sync: gradients accumulate locally while it lives. */
  class NoSync {
   public:
    explicit NoSync(ddp_reducer* r) : r_(r) { check(ddp_reducer_set_sync(r_, 0), "ddp_reducer_set_sync"); }
    ~NoSync() { ddp_reducer_set_sync(r_, 1); }
   private:
    ddp_reducer* r_;
  };
  NoSync no_sync() { return NoSync(reducer_); }

  /** PyTorch's register_comm_hook: e.g. ddp_comm_hook_powersgd; call between steps. */
  void register_comm_hook(const ddp_comm_hook* hook) {
    check(ddp_reducer_set_comm_hook(reducer_, hook), "ddp_reducer_set_comm_hook");
  }

  ddp_reducer* reducer() const { return reducer_; }

 private:
  ddp_reducer* reducer_ = nullptr;
};

/**
 * A ddp_module over a LibTorch module the caller keeps and runs (any type
 * with named_parameters() and named_buffers(), as torch::nn::Module):
 * ddp_module_from_tensors with its parameters and buffers by name, shared.
 * @return a new reference (ddp_module_free); throws ddp::error.
 */
template <typename TorchModule>
ddp_module* module_from(const TorchModule& module) {
  check_torch_version();
  std::vector<std::string> names;
  std::vector<ddp_tensor*> handles;
  std::vector<int> is_buffer;
  auto release = [&] {
    for (auto* h : handles) ddp_tensor_free(h);
  };
  try {
    auto add = [&](const std::string& name, const at::Tensor& t, int buffer) {
      ddp_tensor* h = nullptr;
      check(ddp_tensor_from_aten(&h, &t), "ddp_tensor_from_aten");
      handles.push_back(h);
      names.push_back(name);
      is_buffer.push_back(buffer);
    };
    for (const auto& p : module.named_parameters()) add(p.key(), p.value(), 0);
    for (const auto& b : module.named_buffers()) add(b.key(), b.value(), 1);
    std::vector<const char*> cnames;
    for (const auto& n : names) cnames.push_back(n.c_str());
    ddp_module* m = nullptr;
    check(ddp_module_from_tensors(&m, cnames.data(), handles.data(), is_buffer.data(), handles.size()),
          "ddp_module_from_tensors");
    release();
    return m;
  } catch (...) {
    release();
    throw;
  }
}

/**
 * A ddp_optimizer over the caller's torch::optim::SGD, Adam or AdamW (it
 * must outlive the handle): ddp_optimizer_from_torch.
 * @return a new reference (ddp_optimizer_free); throws ddp::error.
 */
template <typename TorchOptimizer>
ddp_optimizer* optimizer_from(TorchOptimizer& opt) {
  check_torch_version();
  torch::optim::Optimizer* base = &opt;  // a torch::optim optimizer, whatever its kind
  ddp_optimizer* h = nullptr;
  check(ddp_optimizer_from_torch(&h, base), "ddp_optimizer_from_torch");
  return h;
}

/**
 * Lightning's DDPStrategy over models and optimizers the caller writes in
 * LibTorch (see the top of this file): the strategy's handles, owned, with
 * the caller's modules and optimizers looked up by address. Every method
 * throws ddp::error with libddp's message; the collective ones are called
 * by every rank in the same order. Not for concurrent use.
 */
class Strategy {
 public:
  /** ddp_strategy_new, then ddp_strategy_setup_environment (collective). */
  explicit Strategy(const ddp_strategy_options& opts = default_options()) {
    check_torch_version();
    check(ddp_strategy_new(&s_, &opts), "ddp_strategy_new");
    ddp_status st = ddp_strategy_setup_environment(s_);
    if (st != DDP_OK) {
      std::string msg = std::string("ddp_strategy_setup_environment: ") + ddp_last_error_message();
      ddp_strategy_free(s_);
      throw error(st, msg);
    }
  }
  ~Strategy() {
    for (auto& o : optimizers_) ddp_optimizer_free(o.second);
    for (auto& m : modules_) ddp_module_free(m.handle);
    ddp_strategy_free(s_);  // tears down
  }
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  static ddp_strategy_options default_options() {
    ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
    return o;
  }

  ddp_strategy* get() const { return s_; }
  int global_rank() const { return ddp_strategy_global_rank(s_); }
  int local_rank() const { return ddp_strategy_local_rank(s_); }
  int node_rank() const { return ddp_strategy_node_rank(s_); }
  int world_size() const { return ddp_strategy_world_size(s_); }
  bool is_global_zero() const { return ddp_strategy_is_global_zero(s_) == 1; }

  /**
   * ddp_strategy_setup_module over the module's parameters and buffers
   * (module_from): rank 0's values everywhere, gradient sync on the ones
   * that require grad. @p prefix: the module's attribute in a
   * LightningModule with several ("generator."); "" for one module (the
   * options' state_dict_prefix then applies). Collective.
   * @return the module's handle, borrowed (lives as long as this object).
   */
  template <typename TorchModule>
  ddp_module* setup(const TorchModule& module, const std::string& prefix = "") {
    ddp_module* m = module_from(module);
    ddp_status st = ddp_strategy_setup_module(s_, m);
    if (st != DDP_OK) {
      std::string msg = std::string("ddp_strategy_setup_module: ") + ddp_last_error_message();
      ddp_module_free(m);
      throw error(st, msg);
    }
    modules_.push_back({static_cast<const void*>(&module), m, prefix});
    return m;
  }

  /** Registers the caller's optimizer (optimizer_from): stepped by optimizer_step, saved and loaded with checkpoints, in the order added. */
  template <typename TorchOptimizer>
  ddp_optimizer* add_optimizer(TorchOptimizer& opt) {
    ddp_optimizer* h = optimizer_from(opt);
    optimizers_.push_back({static_cast<const void*>(&opt), h});
    return h;
  }

  /**
   * Runs @p forward (the caller's own forward of @p module) between
   * ddp_strategy_forward_begin and _end: buffers broadcast when training,
   * Join's count, the precision's autocast. @return what @p forward returns.
   */
  template <typename TorchModule, typename Forward>
  auto forward(const TorchModule& module, Forward&& forward) -> decltype(forward()) {
    check(ddp_strategy_forward_begin(s_, module_handle(&module)), "ddp_strategy_forward_begin");
    struct End {
      ddp_strategy* s;
      ~End() { ddp_strategy_forward_end(s); }
    } end{s_};
    return forward();
  }

  /**
   * loss.backward() with the gradients averaged over the ranks. Collective.
   * A collective that fails inside it (a dead peer: DDP_E_PEER_FAILED) is a
   * ddp::error with its status; a bare loss.backward() throws the same
   * failure out of autograd's engine as a std::exception, without one.
   */
  void backward(const at::Tensor& loss) {
    ddp_tensor* l = nullptr;
    check(ddp_tensor_from_aten(&l, &loss), "ddp_tensor_from_aten");
    ddp_status st = ddp_strategy_backward(s_, l);
    ddp_tensor_free(l);
    check(st, "ddp_strategy_backward");
  }

  /** The precision's step over an optimizer added with add_optimizer. @return false when the scaler skipped it. */
  template <typename TorchOptimizer>
  bool optimizer_step(TorchOptimizer& opt) {
    int stepped = 0;
    check(ddp_strategy_optimizer_step_v2(s_, optimizer_handle(&opt), &stepped), "ddp_strategy_optimizer_step");
    return stepped == 1;
  }

  /** Lightning's block_backward_sync: gradients accumulate locally while the guard lives. */
  class NoSync {
   public:
    explicit NoSync(ddp_strategy* s) : s_(s) { check(ddp_strategy_block_backward_sync(s_, 1), "block_backward_sync"); }
    ~NoSync() { ddp_strategy_block_backward_sync(s_, 0); }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
   private:
    ddp_strategy* s_;
  };
  NoSync no_sync() { return NoSync(s_); }

  void barrier(const char* name = nullptr) { check(ddp_strategy_barrier(s_, name), "ddp_strategy_barrier"); }

  /** Every module set up and every optimizer added, in Lightning's layout (ddp_strategy_save_checkpoint_v3). Collective. */
  void save_checkpoint(const std::string& path, const ddp_checkpoint_info& info = default_info()) {
    auto a = arrays();
    check(ddp_strategy_save_checkpoint_v3(s_, path.c_str(), a.modules.data(), a.prefix_ptrs(), a.modules.size(),
                                          a.optimizers.data(), a.optimizers.size(), nullptr, 0, &info),
          "ddp_strategy_save_checkpoint");
  }

  /** Reads @p path into the modules and optimizers (ddp_strategy_load_checkpoint_v3). Collective. @return its counters (user bytes left out). */
  ddp_checkpoint_info load_checkpoint(const std::string& path) {
    auto a = arrays();
    ddp_checkpoint_info info = default_info();
    check(ddp_strategy_load_checkpoint_v3(s_, path.c_str(), a.modules.data(), a.prefix_ptrs(), a.modules.size(),
                                          a.optimizers.data(), a.optimizers.size(), nullptr, 0, &info, nullptr),
          "ddp_strategy_load_checkpoint");
    return info;
  }

  /** ddp_strategy_save_checkpoint_to_dir for every module and optimizer: dir/epoch=E-step=S.ckpt, the newest @p keep_last kept. Collective. */
  void save_checkpoint_to_dir(const std::string& dir, int keep_last, const ddp_checkpoint_info& info = default_info()) {
    auto a = arrays();
    check(ddp_strategy_save_checkpoint_to_dir(s_, dir.c_str(), keep_last, a.modules.data(), a.prefix_ptrs(),
                                              a.modules.size(), a.optimizers.data(), a.optimizers.size(), nullptr, 0,
                                              &info),
          "ddp_strategy_save_checkpoint_to_dir");
  }

  /**
   * ddp_strategy_resume_from_dir: the newest checkpoint in @p dir that every
   * rank can load, into the modules, the optimizers and this rank's random
   * stream. Collective. @return false when @p dir has none (a first start; nothing changed).
   */
  bool resume_from_dir(const std::string& dir, ddp_checkpoint_info* info = nullptr) {
    auto a = arrays();
    ddp_checkpoint_info got = default_info();
    int resumed = 0;
    check(ddp_strategy_resume_from_dir(s_, dir.c_str(), a.modules.data(), a.prefix_ptrs(), a.modules.size(),
                                       a.optimizers.data(), a.optimizers.size(), nullptr, 0, &resumed, &got, nullptr,
                                       nullptr),
          "ddp_strategy_resume_from_dir");
    if (resumed && info) *info = got;
    return resumed != 0;
  }

  static ddp_checkpoint_info default_info() {
    ddp_checkpoint_info i = DDP_CHECKPOINT_INFO_INIT;
    return i;
  }

 private:
  struct Module {
    const void* key;
    ddp_module* handle;
    std::string prefix;
  };
  struct Arrays {
    std::vector<ddp_module*> modules;
    std::vector<const char*> prefixes;
    std::vector<ddp_optimizer*> optimizers;
    bool named = false;
    const char* const* prefix_ptrs() const { return named ? prefixes.data() : nullptr; }
  };
  Arrays arrays() const {
    Arrays a;
    for (const auto& m : modules_) {
      a.modules.push_back(m.handle);
      a.prefixes.push_back(m.prefix.c_str());
      a.named = a.named || !m.prefix.empty();
    }
    for (const auto& o : optimizers_) a.optimizers.push_back(o.second);
    return a;
  }
  ddp_module* module_handle(const void* key) const {
    for (const auto& m : modules_)
      if (m.key == key) return m.handle;
    throw error(DDP_E_STATE, "ddp::Strategy: this module was not set up (call setup(module) first)");
  }
  ddp_optimizer* optimizer_handle(const void* key) const {
    for (const auto& o : optimizers_)
      if (o.first == key) return o.second;
    throw error(DDP_E_STATE, "ddp::Strategy: this optimizer was not added (call add_optimizer(opt) first)");
  }

  ddp_strategy* s_ = nullptr;
  std::vector<Module> modules_;
  std::vector<std::pair<const void*, ddp_optimizer*>> optimizers_;
};

}  // namespace ddp

#endif /* DDP_TORCH_HPP */
