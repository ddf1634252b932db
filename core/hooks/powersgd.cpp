// PyTorch's powerSGD_hook: each gradient of the bucket viewed as an n x m
// matrix M is sent as P = M Q (n x r) and Q = M^T P (m x r) when that saves
// enough; vectors and small matrices are all-reduced as they are.
#include "hooks/powersgd.h"

#include <ATen/ops/bmm.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/stack.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "hooks/powersgd_math.h"
#include "hooks/powersgd_state.h"

namespace ddp::core {
namespace powersgd {
std::shared_ptr<PowerSgdHook> make_batched_hook(const PowerSgdOptions& opts);  // batched_powersgd.cpp

namespace {

constexpr uint64_t kSeedBound = 1000000000;  // PyTorch: rng.randint(1_000_000_000)

// Gradients of one shape, in bucket order (PyTorch groups by shape, in the
// order shapes first appear, also when it does not batch them).
struct SameShape {
  std::vector<int64_t> shape;
  std::vector<at::Tensor> matrices;
};

// One low-rank product: a (batch, n, m) stack of matrices and its P and Q,
// views into the bucket's P and Q memories.
struct Factor {
  at::Tensor matrices, p, q;
  const SameShape* stacked_from = nullptr;  // set when `matrices` is a copy
};

// Everything a step needs after its first collective was started.
struct Step {
  at::Tensor input, input_copy, uncompressed;
  std::vector<at::Tensor> uncompressed_parts;
  std::vector<SameShape> shapes;
  std::vector<Factor> factors;
  PendingPtr uncompressed_reduce;
};

class PerTensorHook : public StatefulHook {
 public:
  explicit PerTensorHook(const PowerSgdOptions& opts) : StatefulHook(opts, "PowerSGD") {}

  PendingPtr run(Group& group, const BucketView& bucket) override {
    if (!compressing()) return allreduce_average(group, bucket);
    auto step = std::make_shared<Step>();
    step->input = bucket.flat;
    if (opts_.use_error_feedback) {
      add_error(bucket.index, step->input);
      step->input_copy = step->input.clone();
    }
    int64_t p_total = 0, q_total = 0;
    split(bucket, *step, p_total, q_total);
    BucketMemory& mem = place(bucket.index, step->input);
    const bool fresh = !opts_.warm_start || !mem.p.defined();
    if (!fresh) {
      check_memory_fits(bucket.index, "p", mem.p, {p_total});
      check_memory_fits(bucket.index, "q", mem.q, {q_total});
    }
    if (fresh) {
      mem.p = at::empty({p_total}, step->input.options());
      mem.q = at::empty({q_total}, step->input.options());
    }
    lay_out_factors(mem, *step);
    if (fresh) {
      SeededNormal normal(seeds_.randint(kSeedBound));
      for (auto& f : step->factors) f.q.copy_(normal.draw(f.q.sizes(), f.q));
    }
    for (auto& f : step->factors) {
      orthogonalize(f.q, opts_.orthogonalization_epsilon);
      at::bmm_out(f.p, f.matrices, f.q);
    }
    if (step->uncompressed.numel() > 0)
      step->uncompressed_reduce = all_reduce(group, step->uncompressed, ReduceOp::Sum);
    const size_t index = bucket.index;
    const bool is_last = bucket.is_last;
    const int divisor = bucket.divisor;
    return std::make_unique<Pending>(group, "PowerSGD", nullptr,
                                     [this, &group, step, index, is_last, divisor](Pending&, Clock::time_point deadline) {
                                       finish(group, *step, index, divisor, deadline);
                                       end_of_bucket(is_last);
                                     });
  }

 private:
  // Sorts the bucket's gradients into compressed (by shape) and uncompressed
  // ones, counting the statistics as PyTorch does.
  void split(const BucketView& bucket, Step& step, int64_t& p_total, int64_t& q_total) {
    int64_t before = 0, after = 0;
    for (size_t k = 0; k < bucket.shapes.size(); ++k) {
      const auto& shape = bucket.shapes[k];
      int64_t numel = 1;
      for (int64_t d : shape) numel *= d;
      at::Tensor g = step.input.narrow(0, bucket.offsets[k], numel).view(shape);
      before += numel;
      if (shape.empty()) {  // a 0-d gradient is not a matrix
        step.uncompressed_parts.push_back(g);
        after += numel;
        continue;
      }
      at::Tensor m = g.view({shape[0], -1});
      int64_t n = m.size(0), cols = m.size(1);
      int64_t r = std::min({n, cols, opts_.matrix_approximation_rank});
      if (!should_compress(n, cols, r, opts_.min_compression_rate)) {
        step.uncompressed_parts.push_back(g);
        after += numel;
        continue;
      }
      after += (n + cols) * r;
      p_total += n * r;
      q_total += cols * r;
      std::vector<int64_t> key{n, cols};
      auto it = std::find_if(step.shapes.begin(), step.shapes.end(), [&](const SameShape& s) { return s.shape == key; });
      if (it == step.shapes.end()) {
        step.shapes.push_back(SameShape{key, {}});
        it = step.shapes.end() - 1;
      }
      it->matrices.push_back(m);
    }
    count(before, after);
    std::vector<at::Tensor> flat;
    for (auto& t : step.uncompressed_parts) flat.push_back(t.reshape(-1));
    step.uncompressed = flat.empty() ? at::empty({0}, step.input.options()) : at::cat(flat);
  }

  void lay_out_factors(BucketMemory& mem, Step& step) {
    int64_t p_at = 0, q_at = 0;
    auto add = [&](at::Tensor matrices, const SameShape* from) {
      int64_t b = matrices.size(0), n = matrices.size(1), m = matrices.size(2);
      int64_t r = std::min({n, m, opts_.matrix_approximation_rank});
      Factor f{matrices, mem.p.narrow(0, p_at, b * n * r).view({b, n, r}), mem.q.narrow(0, q_at, b * m * r).view({b, m, r}),
               from};
      p_at += b * n * r;
      q_at += b * m * r;
      step.factors.push_back(f);
    };
    for (const SameShape& s : step.shapes) {
      if (opts_.batch_tensors_with_same_shape && s.matrices.size() > 1) {
        add(at::stack(s.matrices), &s);
      } else {
        for (const auto& m : s.matrices) add(m.unsqueeze(0), nullptr);
      }
    }
  }

  void finish(Group& group, Step& step, size_t index, int divisor, Clock::time_point deadline) {
    BucketMemory& mem = memory_[index];
    if (step.uncompressed_reduce) {
      wait_until(*step.uncompressed_reduce, deadline);
      step.uncompressed.div_(divisor);
      int64_t at = 0;
      for (auto& t : step.uncompressed_parts) {
        t.copy_(step.uncompressed.narrow(0, at, t.numel()).view_as(t));
        at += t.numel();
      }
    }
    wait_until(*all_reduce(group, mem.p, ReduceOp::Sum), deadline);
    for (auto& f : step.factors) orthogonalize(f.p, opts_.orthogonalization_epsilon);
    for (auto& f : step.factors) at::bmm_out(f.q, f.matrices.transpose(1, 2), f.p);
    wait_until(*all_reduce(group, mem.q, ReduceOp::Sum), deadline);
    mem.q.div_(divisor);
    for (auto& f : step.factors) {
      at::bmm_out(f.matrices, f.p, f.q.transpose(1, 2));
      if (f.stacked_from) {
        for (size_t i = 0; i < f.stacked_from->matrices.size(); ++i) f.stacked_from->matrices[i].copy_(f.matrices[i]);
      }
    }
    if (opts_.use_error_feedback) mem.error = step.input_copy - step.input;
    if (!opts_.warm_start) {
      mem.p = at::Tensor();
      mem.q = at::Tensor();
    }
  }
};

}  // namespace
}  // namespace powersgd

std::shared_ptr<PowerSgdHook> make_powersgd_hook(const PowerSgdOptions& opts) {
  check_arg(opts.matrix_approximation_rank >= 1,
            "PowerSGD: matrix_approximation_rank " + std::to_string(opts.matrix_approximation_rank) + " must be >= 1");
  check_arg(opts.start_powersgd_iter >= 0,
            "PowerSGD: start_powersgd_iter " + std::to_string(opts.start_powersgd_iter) + " is negative");
  check_arg(!(opts.use_error_feedback || opts.warm_start) || opts.start_powersgd_iter > 1,
            "PowerSGD: start_powersgd_iter must be > 1 when use_error_feedback or warm_start is on (got " +
                std::to_string(opts.start_powersgd_iter) +
                "): their per-bucket state must not be taken before the buckets are final");
  check_arg(opts.min_compression_rate >= 0,
            "PowerSGD: min_compression_rate " + std::to_string(opts.min_compression_rate) + " is not a number >= 0");
  check_arg(opts.orthogonalization_epsilon >= 0,
            "PowerSGD: orthogonalization_epsilon " + std::to_string(opts.orthogonalization_epsilon) + " is not a number >= 0");
  if (opts.batched) return powersgd::make_batched_hook(opts);
  return std::make_shared<powersgd::PerTensorHook>(opts);
}

}  // namespace ddp::core