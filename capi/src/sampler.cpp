// Data sharding: argument checks, then core/data/distributed_sampler.
#include "ddp/sampler.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "data/distributed_sampler.h"
#include "fence.h"

using namespace ddp::capi;

namespace {

ddp::core::SamplerOptions options_of(const ddp_sampler_options* opts) {
  ddp::core::SamplerOptions o;
  if (!opts) return o;
  if (opts->version < 1 || opts->version > DDP_SAMPLER_OPTIONS_VERSION)
    fail(DDP_E_INVALID_ARGUMENT, "ddp_sampler_indices: unknown options version " + std::to_string(opts->version));
  o.shuffle = opts->shuffle != 0;
  o.seed = opts->seed;
  o.drop_last = opts->drop_last != 0;
  if (opts->version >= 2) o.unrepeated = opts->unrepeated != 0;
  if (opts->version >= 3) o.start = opts->start;
  return o;
}

}  // namespace

extern "C" {

ddp_status ddp_sampler_options_init(ddp_sampler_options* opts, unsigned int version) {
  if (opts && (version == 1 || version == 2)) {
    // An earlier struct ends before its first later field.
    ddp_sampler_options d = DDP_SAMPLER_OPTIONS_INIT;
    d.version = version;
    std::memcpy(static_cast<void*>(opts), &d,
                version == 1 ? offsetof(ddp_sampler_options, unrepeated) : offsetof(ddp_sampler_options, start));
    return DDP_OK;
  }
  return init_options(opts, version, DDP_SAMPLER_OPTIONS_VERSION, ddp_sampler_options DDP_SAMPLER_OPTIONS_INIT, "ddp_sampler_options_init");
}

ddp_status ddp_sampler_num_samples(int64_t dataset_size, int num_replicas, int drop_last, int64_t* out) {
  if (!out) return invalid("ddp_sampler_num_samples: out is NULL");
  return fence([&] { *out = ddp::core::sampler_num_samples(dataset_size, num_replicas, drop_last != 0); });
}

ddp_status ddp_sampler_indices(int64_t dataset_size, int num_replicas, int rank, int64_t epoch,
                               const ddp_sampler_options* opts, int64_t* out, size_t cap, size_t* count) {
  if (count) *count = 0;
  if (!out && cap > 0) return invalid("ddp_sampler_indices: out is NULL with cap > 0");
  return fence([&] {
    const ddp::core::SamplerOptions o = options_of(opts);
    if (cap == 0) {  // sizing `out`: counted, not listed (the list is the whole epoch's permutation)
      const int64_t n = ddp::core::sampler_count(dataset_size, num_replicas, rank, o);
      if (count) *count = static_cast<size_t>(n);
      return;
    }
    auto mine = ddp::core::sampler_indices(dataset_size, num_replicas, rank, epoch, o);
    std::copy_n(mine.begin(), std::min(cap, mine.size()), out);
    if (count) *count = mine.size();
  });
}

}  // extern "C"
