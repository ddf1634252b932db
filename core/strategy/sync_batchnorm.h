// Lightning's sync_batchnorm for TorchScript modules: at setup_module every
// aten::batch_norm in the module's methods (each BatchNorm1d/2d/3d of a
// scripted module, or one a trace recorded) becomes libddp's
// ddp::sync_batch_norm operator, bound to the strategy's group. In training
// it normalises with the global batch's statistics (comm/sync_batch_norm.h);
// in eval it is batch_norm with the running statistics, with no collective.
#pragma once

#include <cstdint>
#include <memory>

#include "comm/group.h"

namespace ddp::core {

class ScriptModule;

// Binds the converted modules' operator to a group for as long as it lives;
// afterwards a converted module still evaluates, and training it is
// Status::State naming the reason.
class SyncBatchNormBinding {
 public:
  explicit SyncBatchNormBinding(std::shared_ptr<Group> group);
  ~SyncBatchNormBinding();
  SyncBatchNormBinding(const SyncBatchNormBinding&) = delete;
  SyncBatchNormBinding& operator=(const SyncBatchNormBinding&) = delete;
  int64_t id() const { return id_; }

 private:
  int64_t id_;
};

// Converts every batch norm of `module` to the synchronised one of
// `binding`; returns how many it converted (0 for a module without batch
// norms: nothing changes). A module converted before is converted again to
// the new binding.
int convert_sync_batchnorm(ScriptModule& module, const SyncBatchNormBinding& binding);

}  // namespace ddp::core
