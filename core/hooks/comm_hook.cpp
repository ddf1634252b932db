#include "hooks/comm_hook.h"

#include "common/error.h"

namespace ddp::core {
namespace {
class AllreduceHook : public CommHook {
 public:
  PendingPtr run(Group& group, const BucketView& bucket) override {
    return divide_then_sum(group, bucket.flat, bucket.divisor);
  }
};
}  // namespace

std::shared_ptr<CommHook> make_allreduce_hook() { return std::make_shared<AllreduceHook>(); }

PendingPtr completed(Group& group, const char* op) { return std::make_unique<Pending>(group, op, nullptr, nullptr); }

PendingPtr then(Group& group, const char* op, PendingPtr inner, std::function<void()> after) {
  auto shared = std::shared_ptr<Pending>(std::move(inner));
  return std::make_unique<Pending>(group, op, nullptr, [shared, after](Pending&, Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now());
    shared->wait(std::max(Millis(0), left));
    after();
  });
}

void CommHook::attach(const void* reducer) {
  const char* kind = stateful_kind();
  if (!kind) return;
  std::lock_guard<std::mutex> lock(holder_mutex_);
  if (holder_ && holder_ != reducer)
    fail(Status::State, std::string("set_comm_hook: this ") + kind +
                            " hook serves another reducer already; a hook that keeps state between steps serves one "
                            "reducer (create one per reducer, or free the other reducer first)");
  holder_ = reducer;
  ++holds_;
}

void CommHook::detach(const void* reducer) noexcept {
  if (!stateful_kind()) return;
  std::lock_guard<std::mutex> lock(holder_mutex_);
  if (holder_ == reducer && --holds_ == 0) holder_ = nullptr;
}

namespace {
std::string kind_of_state(const c10::IValue& saved) {
  if (!saved.isGenericDict()) return "a " + saved.tagKind();
  auto d = saved.toGenericDict();
  auto it = d.find("kind");
  return it != d.end() && it->value().isString() ? it->value().toStringRef() : "an unknown kind";
}
}  // namespace

void CommHook::check_state_dict(const c10::IValue& saved) const {
  // A stateless hook goes on whatever was saved before only when nothing was.
  if (!saved.isNone())
    fail(Status::IO, "comm hook state: the checkpoint holds the state of " + kind_of_state(saved) +
                         " hook; this strategy's hook keeps none (resume with the same comm hook)");
}

c10::impl::GenericDict hook_state_of(const c10::IValue& saved, const std::string& kind) {
  if (!saved.isGenericDict() || kind_of_state(saved) != kind)
    fail(Status::IO, "comm hook state: the checkpoint holds the state of " + kind_of_state(saved) + " hook, not " +
                         kind + "'s (resume with the same comm hook)");
  return saved.toGenericDict();
}

const c10::IValue& hook_state_entry(const c10::impl::GenericDict& d, const std::string& kind, const char* key) {
  auto it = d.find(key);
  if (it == d.end()) fail(Status::IO, "comm hook state: " + kind + "'s state lacks '" + key + "'");
  return it->value();
}

int64_t hook_state_int(const c10::impl::GenericDict& d, const std::string& kind, const char* key) {
  const auto& v = hook_state_entry(d, kind, key);
  if (!v.isInt() || v.toInt() < 0)
    fail(Status::IO, "comm hook state: " + kind + "'s '" + key + "' is not a count");
  if (v.toInt() > kMostSteps)  // each step adds to it (types.h)
    fail(Status::IO, "comm hook state: " + kind + "'s '" + key + "' " + std::to_string(v.toInt()) +
                         " is out of range (at most 2^62)");
  return v.toInt();
}

}  // namespace ddp::core
