#include "checkpoint/checkpoint_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "checkpoint/checkpoint_file.h"
#include "common/error.h"

namespace ddp::core {
namespace {

class FileCheckpointIO : public CheckpointIO {
 public:
  void save(const std::vector<uint8_t>& bytes, const std::string& path) override { write_file_atomically(path, bytes); }
  std::vector<uint8_t> load(const std::string& path) override { return read_whole_file(path); }
  void remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fail(Status::IO, "checkpoint " + path + ": cannot remove: " + std::strerror(errno));
  }
};

}  // namespace

std::shared_ptr<CheckpointIO> file_checkpoint_io() { return std::make_shared<FileCheckpointIO>(); }

}  // namespace ddp::core
