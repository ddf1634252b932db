/*
 * Two modules and two optimizers in one strategy (issue 24): a tiny GAN
 * from C on 2 ranks (the strategy's popen launcher). Each step, as PyTorch's
 * DCGAN example orders it: the generator's loss through the discriminator
 * (both engines synchronise), the generator's optimizer steps; then the
 * discriminator's loss on real rows and on the fakes detached (only its
 * engine runs), its optimizer steps. Prints each rank's two losses per step
 * as hex floats; test_surface_parity.py compares them with gan_reference.py
 * (PyTorch DDP, one DistributedDataParallel per module). At the end both
 * modules and both optimizers go into DIR/gan.ckpt (the modules under
 * "generator." and "discriminator.", as a LightningModule with those
 * attributes keeps them), which is then read back into fresh copies of the
 * modules: "rank R reload <entries that differ>" (0 expected).
 *
 *   gan_job DIR [STEPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddp/ddp.h>

#include "job_util.h"


static float xs[N * FEATURES], zs[N * LATENT];

static ddp_module *load(ddp_strategy *s, const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ddp_module *m = NULL;
  check(ddp_module_load(&m, path), name);
  check(ddp_strategy_setup_module(s, m), "setup_module");
  return m;
}

static ddp_tensor *forward(ddp_strategy *s, ddp_module *m, ddp_tensor *in) {
  ddp_tensor *out = NULL;
  check(ddp_strategy_forward(s, m, in, &out), "forward");
  return out;
}

/* binary_cross_entropy_with_logits(logits, target) */
static ddp_tensor *bce(ddp_tensor *logits, ddp_tensor *target) {
  ddp_loss_options o = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_BCE_WITH_LOGITS);
  ddp_tensor *l = NULL;
  check(ddp_loss_compute(&o, logits, target, &l), "bce");
  return l;
}

int main(int argc, char **argv) {
  job_name = "gan_job";
  if (argc < 2) {
    fprintf(stderr, "usage: gan_job DIR [STEPS]\n");
    return 2;
  }
  const int steps = argc > 2 ? atoi(argv[2]) : 10;
  read_file(argv[1], "x.f32", xs, sizeof xs);
  read_file(argv[1], "z.f32", zs, sizeof zs);
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  so.timeout_ms = 60000;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s);
  ddp_module *gen = load(s, argv[1], "gen.pt"), *disc = load(s, argv[1], "disc.pt");
  ddp_sgd_options g_opts = DDP_SGD_OPTIONS_INIT, d_opts = DDP_SGD_OPTIONS_INIT;
  g_opts.lr = 0.05;
  g_opts.momentum = 0.9;
  d_opts.lr = 0.02;
  ddp_optimizer *opt_g = NULL, *opt_d = NULL;
  check(ddp_optimizer_new_sgd(&opt_g, gen, &g_opts), "optimizer G");
  check(ddp_optimizer_new_sgd(&opt_d, disc, &d_opts), "optimizer D");

  float ones[PER_RANK], zeros[PER_RANK];
  for (int i = 0; i < PER_RANK; ++i) ones[i] = 1, zeros[i] = 0;
  int64_t target_shape[2] = {PER_RANK, 1};
  ddp_tensor *t_ones = NULL, *t_zeros = NULL;
  check(ddp_tensor_from_blob(&t_ones, ones, DDP_FLOAT32, target_shape, 2), "ones");
  check(ddp_tensor_from_blob(&t_zeros, zeros, DDP_FLOAT32, target_shape, 2), "zeros");
  for (int step = 0; step < steps; ++step) {
    float real[PER_RANK * REAL], z[PER_RANK * LATENT];
    noise_rows(xs, zs, step, rank, real, z);
    int64_t real_shape[2] = {PER_RANK, REAL}, z_shape[2] = {PER_RANK, LATENT};
    ddp_tensor *t_real = NULL, *t_z = NULL;
    check(ddp_tensor_from_blob(&t_real, real, DDP_FLOAT32, real_shape, 2), "real");
    check(ddp_tensor_from_blob(&t_z, z, DDP_FLOAT32, z_shape, 2), "z");

    /* The generator's step: its loss goes through the discriminator. */
    ddp_tensor *fake = forward(s, gen, t_z), *judged = forward(s, disc, fake), *g_loss = bce(judged, t_ones);
    check(ddp_optimizer_zero_grad(opt_g), "zero_grad G");
    check(ddp_strategy_backward(s, g_loss), "backward G");
    check(ddp_strategy_optimizer_step(s, opt_g), "step G");

    /* The discriminator's step, on the fakes without their graph. */
    ddp_tensor *detached = NULL, *on_real = forward(s, disc, t_real), *on_fake = NULL;
    check(ddp_tensor_clone(fake, &detached), "detach");
    on_fake = forward(s, disc, detached);
    ddp_tensor *l_real = bce(on_real, t_ones), *l_fake = bce(on_fake, t_zeros), *d_loss = NULL;
    check(ddp_tensor_binary(DDP_OP_ADD, l_real, l_fake, &d_loss), "d_loss");
    check(ddp_optimizer_zero_grad(opt_d), "zero_grad D");
    check(ddp_strategy_backward(s, d_loss), "backward D");
    check(ddp_strategy_optimizer_step(s, opt_d), "step D");

    double gv = 0, dv = 0;
    check(ddp_tensor_item(g_loss, &gv), "item");
    check(ddp_tensor_item(d_loss, &dv), "item");
    printf("rank %d gan %d g_loss %a\nrank %d gan %d d_loss %a\n", rank, step, gv, rank, step, dv);
    ddp_tensor *all[] = {t_real, t_z, fake, judged, g_loss, detached, on_real, on_fake, l_real, l_fake, d_loss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) ddp_tensor_free(all[i]);
  }
  char path[4096];
  snprintf(path, sizeof path, "%s/gan.ckpt", argv[1]);
  ddp_module *modules[2] = {gen, disc};
  const char *prefixes[2] = {"generator.", "discriminator."};
  ddp_optimizer *opts[2] = {opt_g, opt_d};
  check(ddp_strategy_save_checkpoint_v3(s, path, modules, prefixes, 2, opts, 2, NULL, 0, NULL), "save_checkpoint");
  /* Read back into fresh copies (not set up: a checkpoint loads into any module). */
  ddp_module *fresh[2] = {NULL, NULL};
  const char *files[2] = {"gen.pt", "disc.pt"};
  for (int i = 0; i < 2; ++i) {
    char p2[4096];
    snprintf(p2, sizeof p2, "%s/%s", argv[1], files[i]);
    check(ddp_module_load(&fresh[i], p2), files[i]);
  }
  check(ddp_strategy_load_checkpoint_v3(s, path, fresh, prefixes, 2, NULL, 0, NULL, 0, NULL, NULL), "load_checkpoint");
  int differ = 0;
  for (int i = 0; i < 2; ++i)
    for (size_t k = 0; k < ddp_module_state_count(modules[i]); ++k) {
      const char *name = NULL;
      ddp_tensor *a = NULL, *b = NULL;
      check(ddp_module_state_name(modules[i], k, &name, NULL), "state_name");
      check(ddp_module_get(modules[i], name, &a), "get");
      check(ddp_module_get(fresh[i], name, &b), "get");
      differ += ddp_tensor_nbytes(a) != ddp_tensor_nbytes(b) ||
                memcmp(ddp_tensor_data(a), ddp_tensor_data(b), ddp_tensor_nbytes(a)) != 0;
      ddp_tensor_free(a);
      ddp_tensor_free(b);
    }
  printf("rank %d reload %d\n", rank, differ);
  fflush(stdout);
  ddp_module_free(fresh[0]);
  ddp_module_free(fresh[1]);
  ddp_tensor_free(t_ones);
  ddp_tensor_free(t_zeros);
  ddp_optimizer_free(opt_g);
  ddp_optimizer_free(opt_d);
  ddp_module_free(gen);
  ddp_module_free(disc);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  return 0;
}
