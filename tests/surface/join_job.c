/*
 * PyTorch's Join for uneven inputs through the strategy (issue 24), on 2
 * ranks the strategy starts itself: rank 0 trains 6 batches, rank 1 four,
 * then each calls ddp_strategy_join. MODEL (gen.pt, no buffers; norm.pt,
 * with a batch norm) maps the GAN's noise rows to the first 6 features, MSE
 * loss, SGD with momentum. JOIN_DIVIDE=0 averages over the ranks still
 * training (divide_by_initial_world_size False). Prints each step's loss
 * and, after the join, a checksum of the whole state (parameters and
 * buffers) as hex floats; join_reference.py prints the same from PyTorch.
 *
 *   join_job DIR MODEL
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddp/ddp.h>

#include "job_util.h"


static float xs[N * FEATURES], zs[N * LATENT];

int main(int argc, char **argv) {
  job_name = "join_job";
  if (argc < 3) {
    fprintf(stderr, "usage: join_job DIR MODEL\n");
    return 2;
  }
  read_file(argv[1], "x.f32", xs, sizeof xs);
  read_file(argv[1], "z.f32", zs, sizeof zs);
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  so.timeout_ms = 60000;
  so.join_enabled = 1;
  so.divide_by_initial_world_size = getenv("JOIN_DIVIDE") ? atoi(getenv("JOIN_DIVIDE")) : 1;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s);
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", argv[1], argv[2]);
  ddp_module *m = NULL;
  check(ddp_module_load(&m, path), "module");
  check(ddp_strategy_setup_module(s, m), "setup_module");
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  ddp_optimizer *opt = NULL;
  check(ddp_optimizer_new_sgd(&opt, m, &sgd), "optimizer");
  const int batches = rank == 0 ? 6 : 4;
  for (int step = 0; step < batches; ++step) {
    float real[PER_RANK * REAL], z[PER_RANK * LATENT];
    noise_rows(xs, zs, step, rank, real, z);
    int64_t real_shape[2] = {PER_RANK, REAL}, z_shape[2] = {PER_RANK, LATENT};
    ddp_tensor *t_real = NULL, *t_z = NULL, *out = NULL, *loss = NULL;
    check(ddp_tensor_from_blob(&t_real, real, DDP_FLOAT32, real_shape, 2), "real");
    check(ddp_tensor_from_blob(&t_z, z, DDP_FLOAT32, z_shape, 2), "z");
    check(ddp_strategy_forward(s, m, t_z, &out), "forward");
    check(ddp_loss_mse(out, t_real, &loss), "loss");
    check(ddp_optimizer_zero_grad(opt), "zero_grad");
    check(ddp_strategy_backward(s, loss), "backward");
    check(ddp_strategy_optimizer_step(s, opt), "step");
    double v = 0;
    check(ddp_tensor_item(loss, &v), "item");
    printf("rank %d step %d loss %a\n", rank, step, v);
    ddp_tensor *all[] = {t_real, t_z, out, loss};
    for (size_t i = 0; i < 4; ++i) ddp_tensor_free(all[i]);
  }
  check(ddp_strategy_join(s), "join");
  double total = 0;
  for (size_t k = 0; k < ddp_module_state_count(m); ++k) {
    const char *name = NULL;
    ddp_tensor *t = NULL, *f = NULL, *sum = NULL;
    check(ddp_module_state_name(m, k, &name, NULL), "state_name");
    check(ddp_module_get(m, name, &t), "get");
    if (ddp_tensor_dtype(t) != DDP_FLOAT32) { /* num_batches_tracked: an integer count */
      ddp_tensor_free(t);
      continue;
    }
    check(ddp_tensor_sum(t, NULL, 0, 0, &sum), "sum");
    double v = 0;
    check(ddp_tensor_item(sum, &v), "item");
    total += v;
    ddp_tensor_free(t);
    ddp_tensor_free(f);
    ddp_tensor_free(sum);
  }
  printf("rank %d joined state %a\n", rank, total);
  fflush(stdout);
  ddp_optimizer_free(opt);
  ddp_module_free(m);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  return 0;
}
