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
 * Or the whole strategy (strategy.h) over a torch::nn::Module:
 *
 *   ddp_module* m = ddp::module_from(*net);     // its parameters and buffers, by name
 *   ddp_strategy_setup_module(s, m);
 *   ddp_strategy_forward_begin(s, m); auto out = net->forward(x); ddp_strategy_forward_end(s);
 *
 * Everything goes through the C ABI (ddp_tensor_from_aten, ddp_reducer_*);
 * only this header needs LibTorch's headers.
 */
#ifndef DDP_TORCH_HPP
#define DDP_TORCH_HPP

#include <ATen/core/Tensor.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "ddp/ddp.h"

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

}  // namespace ddp

#endif /* DDP_TORCH_HPP */
