// Lightning's all_gather(sync_grads=True) (its AllGatherGrad): the gathered
// (world, *shape) tensor has a backward that gives each rank the sum over
// the ranks of the gradient of its own slice, as
// torch.distributed.nn.functional.all_gather does, so a loss over the whole
// gathered batch (a contrastive loss, for one) trains every rank's inputs.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/group.h"

namespace ddp::core {

// Collective forward, and collective backward: every rank must run the
// backward of its result (the same graph everywhere), or the others wait
// until the group's timeout. `in` must have the same shape and dtype on
// every rank.
at::Tensor all_gather_with_grad(const std::shared_ptr<Group>& g, const at::Tensor& in);

}  // namespace ddp::core
