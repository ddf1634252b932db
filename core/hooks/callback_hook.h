// A comm hook that is a plain function and user data: the C API's custom
// hooks (and any caller that is not C++). The group comes with each call.
#pragma once

#include <memory>
#include <string>

#include "common/types.h"
#include "hooks/comm_hook.h"

namespace ddp::core {

// Leaves the reduced bucket in bucket.flat before it returns. A status other
// than Ok (with *why saying what happened) fails this rank's step and is
// published to the other ranks, whose waits stop instead of hanging.
using HookFunction = Status (*)(void* user, Group& group, const BucketView& bucket, std::string* why);

// `user` is kept alive as long as the hook.
std::shared_ptr<CommHook> make_callback_hook(HookFunction fn, std::shared_ptr<void> user);

}  // namespace ddp::core
