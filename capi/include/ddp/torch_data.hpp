/**
 * @file torch_data.hpp
 * @brief Header-only for programs that use LibTorch's torch::data: the
 *        shards of torch.utils.data.DistributedSampler as a torch::data
 *        sampler, so that a C++ job and a Python job of the same world see
 *        the same indices on each rank, epoch by epoch (LibTorch's own
 *        DistributedRandomSampler shuffles differently).
 *
 *   ddp::DistributedSampler sampler(dataset.size().value(), strategy.world_size(), strategy.global_rank());
 *   auto loader = torch::data::make_data_loader(dataset, sampler, torch::data::DataLoaderOptions(32));
 *   for (int64_t epoch = 0; epoch < epochs; ++epoch) {
 *     sampler.set_epoch(epoch);              // as Python's sampler.set_epoch(epoch)
 *     for (auto& batch : *loader) { ... }    // the loader resets its copy, which reads the epoch's order
 *   }
 *
 * Copies of a sampler share its epoch (the loader keeps a copy), so
 * set_epoch on the caller's reaches the loader's.
 *
 * The order comes from sampler.h (ddp_sampler_indices); not stable ABI, as torch.hpp.
 */
#ifndef DDP_TORCH_DATA_HPP
#define DDP_TORCH_DATA_HPP

#include <torch/data/samplers/base.h>
#include <torch/serialize/archive.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "ddp/torch.hpp"

namespace ddp {

/** One rank's indices of DistributedSampler (or Lightning's unrepeated one, by option) for torch::data. */
class DistributedSampler : public torch::data::samplers::Sampler<std::vector<size_t>> {
 public:
  /**
   * @param opts shuffle, seed, drop_last and unrepeated, as sampler.h (the defaults: Python's).
   * Throws ddp::error for a rank outside [0, num_replicas) or num_replicas < 1.
   */
  DistributedSampler(size_t dataset_size, int num_replicas, int rank,
                     const ddp_sampler_options& opts = default_options())
      : size_(dataset_size), replicas_(num_replicas), rank_(rank), opts_(opts) {
    reset(std::nullopt);
  }

  static ddp_sampler_options default_options() {
    ddp_sampler_options o = DDP_SAMPLER_OPTIONS_INIT;
    return o;
  }

  /** Python's set_epoch: the order of the next pass (read when the loader resets the sampler). */
  void set_epoch(int64_t epoch) { *epoch_ = epoch; }
  int64_t epoch() const { return *epoch_; }

  /** Reads this epoch's indices and starts from the first; @p new_size replaces the dataset's size. */
  void reset(std::optional<size_t> new_size = std::nullopt) override {
    if (new_size) size_ = *new_size;
    std::vector<int64_t> raw;
    size_t count = 0;
    check(ddp_sampler_indices(static_cast<int64_t>(size_), replicas_, rank_, *epoch_, &opts_, nullptr, 0, &count),
          "ddp_sampler_indices");
    raw.resize(count);
    check(ddp_sampler_indices(static_cast<int64_t>(size_), replicas_, rank_, *epoch_, &opts_, raw.data(), count,
                              &count),
          "ddp_sampler_indices");
    indices_.assign(raw.begin(), raw.end());
    next_ = 0;
  }

  /** Up to @p batch_size next indices; nullopt when this epoch's are used up. */
  std::optional<std::vector<size_t>> next(size_t batch_size) override {
    if (next_ >= indices_.size()) return std::nullopt;
    size_t n = std::min(batch_size, indices_.size() - next_);
    std::vector<size_t> out(indices_.begin() + static_cast<std::ptrdiff_t>(next_),
                            indices_.begin() + static_cast<std::ptrdiff_t>(next_ + n));
    next_ += n;
    return out;
  }

  /** How many indices this rank gets in an epoch (DistributedSampler's len()). */
  size_t size() const { return indices_.size(); }

  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("epoch", torch::tensor(*epoch_, torch::kInt64), /*is_buffer=*/true);
    archive.write("index", torch::tensor(static_cast<int64_t>(next_), torch::kInt64), /*is_buffer=*/true);
  }
  void load(torch::serialize::InputArchive& archive) override {
    torch::Tensor epoch = torch::empty(1, torch::kInt64), index = torch::empty(1, torch::kInt64);
    archive.read("epoch", epoch, /*is_buffer=*/true);
    archive.read("index", index, /*is_buffer=*/true);
    *epoch_ = epoch.item<int64_t>();
    reset(std::nullopt);
    next_ = std::min(static_cast<size_t>(index.item<int64_t>()), indices_.size());
  }

 private:
  size_t size_;
  int replicas_, rank_;
  ddp_sampler_options opts_;
  std::shared_ptr<int64_t> epoch_ = std::make_shared<int64_t>(0);  // shared by copies
  std::vector<size_t> indices_;
  size_t next_ = 0;
};

}  // namespace ddp

#endif /* DDP_TORCH_DATA_HPP */
