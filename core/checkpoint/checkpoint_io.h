// Where checkpoint bytes go: Lightning's CheckpointIO plugin. The strategy
// decides what a checkpoint holds and the format how it is encoded; a
// CheckpointIO only stores, fetches and removes the bytes under a path, so a
// caller can route checkpoints through its own storage.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "checkpoint/torch_archive.h"

namespace ddp::core {

class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  // Each throws an Error (Status::IO) naming the path and the reason.
  virtual void save(const std::vector<uint8_t>& bytes, const std::string& path) = 0;
  virtual std::vector<uint8_t> load(const std::string& path) = 0;
  virtual void remove(const std::string& path) = 0;
  // The content as it is written, so that an IO that can stores it without
  // holding the whole file in memory; by default it is gathered and saved.
  virtual void save_streamed(const ContentWriter& write, const std::string& path);
  // The content to read from at any offset; by default what load returns.
  virtual std::shared_ptr<caffe2::serialize::ReadAdapterInterface> open(const std::string& path);
};

// Bytes in memory as a source to read a torch archive from.
std::shared_ptr<caffe2::serialize::ReadAdapterInterface> bytes_source(std::vector<uint8_t> bytes);

// The default: local files, written atomically as they are streamed (a
// temporary file, fsync, rename, fsync of the directory) and read in place;
// removing a file that does not exist is not an error.
std::shared_ptr<CheckpointIO> file_checkpoint_io();

}  // namespace ddp::core
