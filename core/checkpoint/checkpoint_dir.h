// A directory of a run's checkpoints, as Lightning's ModelCheckpoint keeps
// one: files named "epoch=E-step=S.ckpt" (its default name), the newest the
// one with the most optimizer steps. Only names are read here; whether a
// file's content is whole is for the reader (a file is only ever renamed
// into place whole, so a crash leaves a stray temporary, never a torn
// checkpoint under a checkpoint's name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::core {

struct CheckpointName {
  int64_t epoch = 0;
  int64_t step = 0;
};

// "epoch=E-step=S.ckpt".
std::string checkpoint_file_name(const CheckpointName& n);

// The checkpoints in `dir`, newest first (by step, then epoch); a missing
// directory has none. Status::IO when `dir` exists but cannot be read.
std::vector<CheckpointName> list_checkpoints(const std::string& dir);

// Removes all but the newest `keep` checkpoints (keep <= 0 keeps all), and
// temporaries of writers that are no longer running. Returns what it
// removed; Status::IO naming a file that could not be removed.
std::vector<std::string> prune_checkpoints(const std::string& dir, int keep);

}  // namespace ddp::core
