// A run that a launcher restarts picks up where it stopped: checkpoints in
// a directory, and the newest one every rank can load, agreed.
#include <sys/stat.h>

#include <ATen/ops/full.h>

#include <cerrno>
#include <cstring>

#include "checkpoint/checkpoint_dir.h"
#include "comm/collectives.h"
#include "common/error.h"
#include "model/seeding.h"
#include "strategy/ddp_strategy.h"

namespace ddp::core {
namespace {

// At most this many of rank 0's newest files are candidates: a job that
// cannot load any of the newest 64 has a problem no older file solves.
constexpr size_t kMaxCandidates = 64;

void make_directories(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at < dir.size() && dir[at] != '/') continue;
    const std::string part = dir.substr(0, at);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      fail(Status::IO, "checkpoint directory " + dir + ": cannot create " + part + ": " + std::strerror(errno));
  }
}

std::vector<uint8_t> encode(const std::vector<CheckpointName>& names) {
  std::vector<uint8_t> bytes(names.size() * sizeof(CheckpointName));
  if (!names.empty()) std::memcpy(bytes.data(), names.data(), bytes.size());
  return bytes;
}

std::vector<CheckpointName> decode(const std::vector<uint8_t>& bytes) {
  std::vector<CheckpointName> names(bytes.size() / sizeof(CheckpointName));
  if (!names.empty()) std::memcpy(names.data(), bytes.data(), names.size() * sizeof(CheckpointName));
  return names;
}

}  // namespace

std::string DdpStrategy::save_checkpoint_to_dir(const std::string& dir, int keep,
                                                const std::vector<CheckpointModule>& modules,
                                                const TrainingObjects& objects, const CheckpointInfo& info) {
  require_setup("save_checkpoint_to_dir");
  check_arg(!dir.empty(), "save_checkpoint_to_dir: the directory is empty");
  if (!local_checkpoint_files_)
    fail(Status::Unsupported, "save_checkpoint_to_dir: a checkpoint directory needs local files, and the strategy's "
                              "checkpoint_io is the caller's (save_checkpoint with it names each path)");
  on_rank_zero("save_checkpoint_to_dir", "create " + dir, [&] { make_directories(dir); });
  // Lightning's name: the epoch it was saved in, 0-based (at an epoch's end
  // the counter already says the next).
  const int64_t in_epoch = info.samples_in_epoch == 0 && info.epoch > 0 ? info.epoch - 1 : info.epoch;
  const std::string path = dir + "/" + checkpoint_file_name({in_epoch, info.step});
  save_checkpoint(path, modules, objects, info);
  on_rank_zero("save_checkpoint_to_dir", "prune " + dir, [&] { prune_checkpoints(dir, keep); });
  return path;
}

DdpStrategy::Resumed DdpStrategy::resume_from_dir(const std::string& dir, const std::vector<CheckpointModule>& modules,
                                                  const TrainingObjects& objects) {
  require_setup("resume_from_dir");
  check_arg(!dir.empty(), "resume_from_dir: the directory is empty");
  if (!local_checkpoint_files_)
    fail(Status::Unsupported, "resume_from_dir: a checkpoint directory needs local files, and the strategy's "
                              "checkpoint_io is the caller's (load_checkpoint with it names each path)");
  // Rank 0 wrote the files, so its list is the candidates; a rank that
  // cannot read the directory says so through the same agreement (it has
  // none of them).
  std::vector<CheckpointName> mine;
  std::string unreadable;
  try {
    mine = list_checkpoints(dir);
  } catch (const Error& e) {
    unreadable = e.what();
  }
  if (mine.size() > kMaxCandidates) mine.resize(kMaxCandidates);
  std::vector<uint8_t> bytes = is_global_zero() ? encode(mine) : std::vector<uint8_t>();
  run_collective([&] {
    auto p = broadcast_bytes(*group_, bytes.data(), bytes.size(), 0);
    p->wait();
    bytes = p->bytes;
  });
  const std::vector<CheckpointName> candidates = decode(bytes);
  Resumed out;
  if (candidates.empty()) {
    if (is_global_zero() && !unreadable.empty()) fail(Status::IO, "resume_from_dir: " + unreadable);
    return out;
  }
  // Per candidate, the lowest rank without it (world_size: every rank has it).
  at::Tensor lacking = at::full({static_cast<int64_t>(candidates.size())}, world_size(), at::kLong);
  int64_t* row = lacking.data_ptr<int64_t>();
  for (size_t i = 0; i < candidates.size(); ++i) {
    bool have = false;
    for (const auto& n : mine) have = have || (n.step == candidates[i].step && n.epoch == candidates[i].epoch);
    if (!have) row[i] = global_rank();
  }
  if (group_->device().type == DeviceType::CUDA) lacking = lacking.to(at::Device(at::kCUDA, group_->device().index));
  run_collective([&] { all_reduce_blocking(*group_, lacking, ReduceOp::Min); });
  lacking = lacking.cpu();
  row = lacking.data_ptr<int64_t>();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string path = dir + "/" + checkpoint_file_name(candidates[i]);
    const int64_t without = row[i];
    if (without < world_size()) {
      out.passed_over.push_back(path + ": rank " + std::to_string(without) + " does not have it");
      continue;
    }
    try {
      // Collective and agreed: it loads on every rank or on none.
      out.info = load_checkpoint(path, modules, objects);
    } catch (const Error& e) {
      if (e.status() != Status::IO) throw;
      out.passed_over.push_back(path + ": " + e.what());
      continue;
    }
    // Where the run stopped, its random stream too (dropout, randn): the
    // rest of the run draws what it would have drawn.
    if (out.info.rng_state.defined()) set_cpu_rng_state(out.info.rng_state);
    out.resumed = true;
    out.path = path;
    return out;
  }
  std::string why;
  for (const auto& p : out.passed_over) why += (why.empty() ? "" : "; ") + p;
  fail(Status::IO, "resume_from_dir: none of the " + std::to_string(candidates.size()) + " checkpoints in " + dir +
                       " loads on every rank (every rank must see the directory, a shared filesystem across "
                       "nodes): " + why);
}

}  // namespace ddp::core
