/*
 * A gradient-sync step from C: each rank owns its gradient arrays (as any
 * framework would), marks them ready as backward produces them (last layer
 * first), and after ddp_reducer_finish every rank holds the average.
 *   ddprun --standalone --nproc-per-node 2 ./grad_sync
 */
#include <stdio.h>

#include <ddp/ddp.h>

#define CHECK(call)                                                                              \
  do {                                                                                           \
    ddp_status s_ = (call);                                                                      \
    if (s_ != DDP_OK) {                                                                          \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ddp_status_string(s_), ddp_last_error_message()); \
      return 1;                                                                                  \
    }                                                                                            \
  } while (0)

int main(void) {
  ddp_group *g = NULL;
  CHECK(ddp_group_init(&g, NULL, NULL)); /* the environment ddprun/torchrun/SLURM gives */
  int rank = ddp_group_rank(g);

  float weight_grad[4][3], bias_grad[4];
  int64_t wshape[2] = {4, 3}, bshape[1] = {4};
  ddp_tensor *grads[2] = {NULL, NULL};
  CHECK(ddp_tensor_from_blob(&grads[0], weight_grad, DDP_FLOAT32, wshape, 2));
  CHECK(ddp_tensor_from_blob(&grads[1], bias_grad, DDP_FLOAT32, bshape, 1));

  ddp_reducer_options opts = DDP_REDUCER_OPTIONS_INIT;
  opts.broadcast_parameters = 0; /* gradients only in this example */
  ddp_reducer *reducer = NULL;
  CHECK(ddp_reducer_new(&reducer, g, NULL, grads, 2, &opts));

  ddp_comm_hook *fp16 = NULL; /* optional: PyTorch's fp16_compress_hook */
  CHECK(ddp_comm_hook_fp16_compress(&fp16));
  CHECK(ddp_reducer_set_comm_hook(reducer, fp16));
  ddp_comm_hook_free(fp16);

  /* "backward": this rank's gradients, the bias (last layer) first */
  for (int i = 0; i < 4; ++i) bias_grad[i] = (float)(rank + i);
  CHECK(ddp_reducer_mark_ready(reducer, 1));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) weight_grad[i][j] = (float)(10 * rank + i + j);
  CHECK(ddp_reducer_mark_ready(reducer, 0));
  CHECK(ddp_reducer_finish(reducer));

  printf("[rank %d] averaged bias grad = [%g %g %g %g], weight grad[0] = [%g %g %g]\n", rank, bias_grad[0],
         bias_grad[1], bias_grad[2], bias_grad[3], weight_grad[0][0], weight_grad[0][1], weight_grad[0][2]);
  ddp_reducer_free(reducer);
  ddp_tensor_free(grads[0]);
  ddp_tensor_free(grads[1]);
  ddp_group_free(g);
  return 0;
}
