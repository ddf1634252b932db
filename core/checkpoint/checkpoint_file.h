// The checkpoint file: named tensors (a module's and an optimizer's state),
// the step, the epoch and a user byte blob, in one file written atomically
// (a temporary file, fsync, rename, fsync of the directory), so that a crash
// leaves the previous checkpoint or the new one, never a mix.
//
// Reading trusts nothing: every length is checked against what is left of
// the file before anything is allocated, shapes against their byte sizes,
// and a CRC-32 over the whole content against its last four bytes. A
// truncated, foreign or damaged file is DDP_E_IO naming what was wrong, and
// since loading builds new tensors, the caller's model is untouched unless
// the whole file was good.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ddp::core {

struct NamedTensor {
  std::string name;
  at::Tensor tensor;
};

struct Checkpoint {
  int64_t step = 0;
  int64_t epoch = 0;
  std::vector<NamedTensor> tensors;  // saved from any device, loaded onto the CPU
  std::vector<uint8_t> user;         // the caller's own bytes
};

// The checkpoint as bytes (the file's content), and back: decoding trusts
// nothing, as above; `name` (the path) goes into its messages.
std::vector<uint8_t> encode_checkpoint(const Checkpoint& c);
Checkpoint decode_checkpoint(const std::vector<uint8_t>& bytes, const std::string& name);

// Writes a file's content to the sink it is given, in order (the sink
// throws on a failed write).
using ContentWriter = std::function<void(const std::function<void(const void*, size_t)>& sink)>;

// The content `write` streams (or `bytes`) to `path` atomically: a temporary
// file, fsync, rename, fsync of the directory. Throws DDP_E_IO naming the
// path and the system's reason; an existing file at `path` is then left as
// it was, and so is one when `write` throws.
void write_file_atomically(const std::string& path, const ContentWriter& write);
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);
// The whole file; DDP_E_IO naming the path when it cannot be read.
std::vector<uint8_t> read_whole_file(const std::string& path);

// Writes `c` to `path` atomically. Throws DDP_E_IO naming the path and the
// system's reason; an existing file at `path` is then left as it was.
void save_checkpoint_file(const std::string& path, const Checkpoint& c);

// Reads the checkpoint at `path`. Throws DDP_E_IO naming the path and what
// was wrong with it.
Checkpoint load_checkpoint_file(const std::string& path);

}  // namespace ddp::core
