#include "hooks/callback_hook.h"

#include "common/error.h"

namespace ddp::core {
namespace {

class CallbackHook : public CommHook {
 public:
  CallbackHook(HookFunction fn, std::shared_ptr<void> user) : fn_(fn), user_(std::move(user)) {}

  PendingPtr run(Group& group, const BucketView& bucket) override {
    std::string why;
    Status s = fn_(user_.get(), group, bucket, &why);
    if (s != Status::Ok) group.fail_and_publish(s, why);
    return completed(group, "custom comm hook");
  }

 private:
  HookFunction fn_;
  std::shared_ptr<void> user_;
};

}  // namespace

std::shared_ptr<CommHook> make_callback_hook(HookFunction fn, std::shared_ptr<void> user) {
  check_arg(fn != nullptr, "a callback comm hook needs a function");
  return std::make_shared<CallbackHook>(fn, std::move(user));
}

}  // namespace ddp::core
