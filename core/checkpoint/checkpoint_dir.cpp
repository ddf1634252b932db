#include "checkpoint/checkpoint_dir.h"

#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.h"

namespace ddp::core {
namespace {

// Exactly "epoch=<digits>-step=<digits>.ckpt", nothing around it.
bool parse_name(const char* name, CheckpointName* out) {
  long long epoch = -1, step = -1;
  int end = 0;
  if (std::sscanf(name, "epoch=%lld-step=%lld.ckpt%n", &epoch, &step, &end) != 2 || end == 0 || name[end] != '\0')
    return false;
  if (epoch < 0 || step < 0) return false;
  // sscanf also takes "+1" or " 1"; the name must be the one this file writes.
  if (checkpoint_file_name({epoch, step}) != name) return false;
  *out = {epoch, step};
  return true;
}

// "<checkpoint>.tmp.<pid>.<call>" from checkpoint_file's atomic writer
// ("<checkpoint>.tmp.<pid>" from libddp before it), whose writer is gone.
bool stale_temporary(const std::string& name) {
  auto at = name.rfind(".tmp.");
  if (at == std::string::npos || name.compare(0, 6, "epoch=") != 0) return false;
  std::string pid = name.substr(at + 5);
  if (auto dot = pid.find('.'); dot != std::string::npos) {
    const std::string call = pid.substr(dot + 1);
    if (call.empty() || call.find_first_not_of("0123456789") != std::string::npos) return false;
    pid.resize(dot);
  }
  if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) return false;
  return ::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH;
}

std::vector<std::string> entries(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    if (errno == ENOENT) return {};
    fail(Status::IO, "checkpoint directory " + dir + ": cannot read it: " + std::strerror(errno));
  }
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d.get())) names.emplace_back(e->d_name);
  return names;
}

}  // namespace

std::string checkpoint_file_name(const CheckpointName& n) {
  return "epoch=" + std::to_string(n.epoch) + "-step=" + std::to_string(n.step) + ".ckpt";
}

std::vector<CheckpointName> list_checkpoints(const std::string& dir) {
  std::vector<CheckpointName> found;
  for (const auto& name : entries(dir)) {
    CheckpointName n;
    if (parse_name(name.c_str(), &n)) found.push_back(n);
  }
  std::sort(found.begin(), found.end(), [](const CheckpointName& a, const CheckpointName& b) {
    return a.step != b.step ? a.step > b.step : a.epoch > b.epoch;
  });
  return found;
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int keep) {
  std::vector<std::string> doomed;
  if (keep > 0) {
    auto all = list_checkpoints(dir);
    for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) doomed.push_back(checkpoint_file_name(all[i]));
  }
  for (const auto& name : entries(dir))
    if (stale_temporary(name)) doomed.push_back(name);
  for (const auto& name : doomed) {
    const std::string path = dir + "/" + name;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      fail(Status::IO, "checkpoint directory " + dir + ": cannot remove " + name + ": " + std::strerror(errno));
  }
  return doomed;
}

}  // namespace ddp::core
