#include "hooks/powersgd_state.h"

#include <ATen/ops/zeros_like.h>

#include <algorithm>

#include "common/error.h"

namespace ddp::core::powersgd {

BucketMemory& StatefulHook::place(size_t bucket, const at::Tensor& like) {
  BucketMemory& mem = memory_[bucket];
  for (at::Tensor* t : {&mem.error, &mem.p, &mem.q})
    if (t->defined() && t->device() != like.device()) *t = t->to(like.device());
  return mem;
}

void StatefulHook::check_memory_fits(size_t bucket, const char* what, const at::Tensor& have,
                                     at::IntArrayRef want) const {
  if (have.defined() && have.sizes() == want) return;
  fail(Status::IO, "comm hook state: " + kind_ + "'s '" + what + "' of bucket " + std::to_string(bucket) +
                       (have.defined() ? " has shape " + c10::str(have.sizes()) : std::string(" is missing")) +
                       ", this bucket needs " + c10::str(want) +
                       " (were these memories made for other buckets: a checkpoint or a reducer the hook served "
                       "before, of another bucket_cap_mb or model?)");
}

void StatefulHook::add_error(size_t bucket, const at::Tensor& input) {
  BucketMemory& mem = place(bucket, input);
  if (mem.error.defined()) {
    check_memory_fits(bucket, "error", mem.error, input.sizes());
    input.add_(mem.error);
  } else {
    mem.error = at::zeros_like(input);
  }
}

PendingPtr StatefulHook::allreduce_average(Group& group, const BucketView& bucket) {
  end_of_bucket(bucket.is_last);
  return divide_then_sum(group, bucket.flat, bucket.divisor);
}

namespace {
using Dict = c10::impl::GenericDict;
Dict new_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }
}  // namespace

c10::IValue StatefulHook::state_dict() const {
  Dict d = new_dict();
  d.insert("kind", kind_);
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    d.insert("iter", iter_);
    d.insert("total_numel_before_compression", static_cast<int64_t>(stats_.numel_before));
    d.insert("total_numel_after_compression", static_cast<int64_t>(stats_.numel_after));
  }
  std::vector<int64_t> rng = seeds_.state();
  d.insert("rng", at::tensor(rng, at::kLong));
  Dict buckets(c10::IntType::get(), c10::AnyType::get());
  for (const auto& [index, mem] : memory_) {
    Dict m = new_dict();
    if (mem.error.defined()) m.insert("error", mem.error);
    if (mem.p.defined()) m.insert("p", mem.p);
    if (mem.q.defined()) m.insert("q", mem.q);
    buckets.insert(static_cast<int64_t>(index), m);
  }
  d.insert("buckets", buckets);
  return d;
}

std::map<size_t, BucketMemory> StatefulHook::read_memory(const Dict& d) const {
  const auto& b = hook_state_entry(d, kind_, "buckets");
  if (!b.isGenericDict()) fail(Status::IO, "comm hook state: " + kind_ + "'s 'buckets' is not a dict");
  std::map<size_t, BucketMemory> out;
  for (const auto& e : b.toGenericDict()) {
    if (!e.key().isInt() || e.key().toInt() < 0 || !e.value().isGenericDict())
      fail(Status::IO, "comm hook state: " + kind_ + "'s 'buckets' is not a dict of bucket index to memories");
    const size_t index = static_cast<size_t>(e.key().toInt());
    BucketMemory mem;
    for (const auto& t : e.value().toGenericDict()) {
      if (!t.key().isString() || !t.value().isTensor())
        fail(Status::IO, "comm hook state: bucket " + std::to_string(index) + " holds a " + t.value().tagKind());
      const std::string& name = t.key().toStringRef();
      at::Tensor& slot = name == "error" ? mem.error : name == "p" ? mem.p : name == "q" ? mem.q : mem.error;
      if (name != "error" && name != "p" && name != "q")
        fail(Status::IO, "comm hook state: bucket " + std::to_string(index) + " has an unknown entry '" + name + "'");
      slot = t.value().toTensor();
      // This hook's own memory of the bucket, where it has one, fixes the shape.
      auto mine = memory_.find(index);
      if (mine != memory_.end()) {
        const at::Tensor& have = name == "error" ? mine->second.error : name == "p" ? mine->second.p : mine->second.q;
        if (have.defined() && (have.sizes() != slot.sizes() || have.scalar_type() != slot.scalar_type()))
          fail(Status::IO, "comm hook state: bucket " + std::to_string(index) + "'s '" + name + "' was saved with " +
                               "another shape (other buckets or another model)");
      }
    }
    out[index] = mem;
  }
  return out;
}

void StatefulHook::check_state_dict(const c10::IValue& saved) const {
  if (saved.isNone()) return;  // nothing saved: the hook starts afresh
  const Dict d = hook_state_of(saved, kind_);
  hook_state_int(d, kind_, "iter");
  hook_state_int(d, kind_, "total_numel_before_compression");
  hook_state_int(d, kind_, "total_numel_after_compression");
  const auto& rng = hook_state_entry(d, kind_, "rng");
  if (!rng.isTensor() || rng.toTensor().scalar_type() != at::kLong || rng.toTensor().numel() != 625)
    fail(Status::IO, "comm hook state: " + kind_ + "'s 'rng' is not a seed stream state");
  LegacySeedStream probe(0);
  at::Tensor r = rng.toTensor().contiguous();
  probe.set_state(std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()));
  read_memory(d);
}

void StatefulHook::load_state_dict(const c10::IValue& saved) {
  check_state_dict(saved);
  if (saved.isNone()) return;
  const Dict d = saved.toGenericDict();
  at::Tensor r = hook_state_entry(d, kind_, "rng").toTensor().contiguous();
  seeds_.set_state(std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel()));
  // Copies (the saved ones may point into a checkpoint file's mapping);
  // the first step moves them to its bucket's device (place()).
  std::map<size_t, BucketMemory> memory = read_memory(d);
  for (auto& [index, mem] : memory)
    for (at::Tensor* t : {&mem.error, &mem.p, &mem.q})
      if (t->defined()) *t = t->clone(at::MemoryFormat::Contiguous);
  memory_ = std::move(memory);
  std::lock_guard<std::mutex> lock(stats_mutex_);
  iter_ = hook_state_int(d, kind_, "iter");
  stats_.iteration = iter_;
  stats_.numel_before = static_cast<uint64_t>(hook_state_int(d, kind_, "total_numel_before_compression"));
  stats_.numel_after = static_cast<uint64_t>(hook_state_int(d, kind_, "total_numel_after_compression"));
}

void wait_until(Pending& p, Clock::time_point deadline) {
  p.wait(std::max(Millis(0), std::chrono::duration_cast<Millis>(deadline - Clock::now())));
}

}  // namespace ddp::core::powersgd
