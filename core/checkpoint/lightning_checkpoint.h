// A training checkpoint in Lightning's layout, in PyTorch's file format
// (torch_archive.h): what Trainer.fit(ckpt_path=...) resumes and
// torch.load(weights_only=True) opens, and what Lightning writes for libddp
// to resume. This file decides the keys; the strategy decides what goes in.
//
//   epoch, global_step, pytorch-lightning_version, state_dict,
//   loops (the fit loop's progress: epochs, batches, optimizer steps),
//   callbacks, optimizer_states, lr_schedulers, MixedPrecision (the grad
//   scaler, with one), and "libddp": {format, user bytes, batches_in_epoch,
//   samples_in_epoch, world_size, each rank's RNG state, the comm hook's state and the model averager's step where there are}.
//
// Reading also accepts libddp's earlier DDPCKPT files (checkpoint_file.h).
#pragma once

#include <ATen/core/ivalue.h>

#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/torch_archive.h"

namespace ddp::core {

struct LightningCheckpoint {
  int64_t epoch = 0;             // epochs completed
  int64_t global_step = 0;       // optimizer steps taken
  int64_t batches_in_epoch = 0;  // batches of an epoch (the loops' progress); 0: global_step / epoch
  // Where a checkpoint taken inside an epoch stands in it: entries of the
  // epoch's sampler list trained on over every rank (0 at an epoch's end),
  // and the world size that trained them (0: not recorded, an older file).
  int64_t samples_in_epoch = 0;
  int64_t world_size = 0;
  std::vector<NamedTensor> state_dict;   // the LightningModule's names
  std::vector<c10::IValue> optimizer_states;  // torch.optim state_dict layout
  std::vector<c10::IValue> lr_schedulers;     // torch.optim.lr_scheduler state_dict layout
  std::vector<NamedTensor> precision;    // the grad scaler's "scale" and "growth_tracker"; empty without one
  std::vector<uint8_t> user;             // the caller's own bytes
  // What the DDP engine keeps between steps beyond the model: the comm
  // hook's state (None: none, or a stateless hook) and the model averager's
  // step (-1: no averager).
  c10::IValue comm_hook_state;
  int64_t averager_step = -1;
  // Each rank's CPU random generator state (a list of byte tensors; None: not saved).
  c10::IValue rng_states;
};

// The Lightning layout's version this file writes (pytorch-lightning_version:
// Lightning migrates checkpoints of older versions on load).
constexpr const char* kLightningLayoutVersion = "2.6.0";

void write_lightning_checkpoint(const LightningCheckpoint& c, const ByteSink& sink);

// A torch.save archive in Lightning's layout, or a DDPCKPT file. Status::IO
// naming `name` and the first thing that is wrong; tensors on the CPU.
LightningCheckpoint read_lightning_checkpoint(std::shared_ptr<caffe2::serialize::ReadAdapterInterface> in,
                                              const std::string& name);

}  // namespace ddp::core
