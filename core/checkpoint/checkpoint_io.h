// Where checkpoint bytes go: Lightning's CheckpointIO plugin. The strategy
// decides what a checkpoint holds and the format how it is encoded; a
// CheckpointIO only stores, fetches and removes the bytes under a path, so a
// caller can route checkpoints through its own storage.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddp::core {

class CheckpointIO {
 public:
  virtual ~CheckpointIO() = default;
  // Each throws an Error (Status::IO) naming the path and the reason.
  virtual void save(const std::vector<uint8_t>& bytes, const std::string& path) = 0;
  virtual std::vector<uint8_t> load(const std::string& path) = 0;
  virtual void remove(const std::string& path) = 0;
};

// The default: local files, written atomically (checkpoint_file.h); removing
// a file that does not exist is not an error.
std::shared_ptr<CheckpointIO> file_checkpoint_io();

}  // namespace ddp::core
