/* The training step through libddp's strategy (strategy.h) from C: a
 * TorchScript module (bench/export_bench_models.py), SGD lr 0.01, one fixed
 * random batch, cross-entropy over 10 classes, as bench_ddp_step_torch.py
 * and bench_ddp_step_lightning.py do with the same models. One process per
 * rank, started by ddprun; rank 0 prints one JSON line.
 *   bench_strategy_step <name> <model.pt> <steps> <dim0> [<dim1> ...]   (the input's shape)
 * BENCH_BUCKET_VIEW=1 sets gradient_as_bucket_view. With DDP_HOST_CACHE_MB=0
 * (no host block cache) the JSON line's impl is libddp-strategy-nocache; in
 * a world of one process, libddp-strategy-1rank. BENCH_PRINT_LOSSES=1: rank 0
 * also prints each step's loss ("loss <step> <value>", all 9 digits), for
 * tests/strategy/test_host_cache_job.sh. */
#include <ddp/ddp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(ddp_status s, const char *what) {
  if (s != DDP_OK) {
    fprintf(stderr, "%s: %s: %s\n", what, ddp_status_string(s), ddp_last_error_message());
    exit(1);
  }
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s <name> <model.pt> <steps> <dim0> [<dim1> ...]\n", argv[0]);
    return 2;
  }
  const char *name = argv[1], *path = argv[2];
  int steps = atoi(argv[3]);
  int64_t shape[8];
  size_t ndim = 0, numel = 1;
  for (int i = 4; i < argc && ndim < 8; ++i) numel *= (size_t)(shape[ndim++] = atoll(argv[i]));

  ddp_strategy_options o = DDP_STRATEGY_OPTIONS_INIT;
  /* ddprun's LOCAL_WORLD_SIZE: 2 ranks, or 1 for libddp's own single-process step */
  o.devices = getenv("LOCAL_WORLD_SIZE") ? atoi(getenv("LOCAL_WORLD_SIZE")) : 2;
  o.gradient_as_bucket_view = getenv("BENCH_BUCKET_VIEW") && !strcmp(getenv("BENCH_BUCKET_VIEW"), "1");
  ddp_strategy *s = NULL;
  ddp_module *m = NULL;
  ddp_optimizer *opt = NULL;
  check(ddp_strategy_new(&s, &o), "strategy");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  check(ddp_module_load(&m, path), "module_load");
  ddp_sgd_options so = DDP_SGD_OPTIONS_INIT;
  so.lr = 0.01;
  check(ddp_optimizer_new_sgd(&opt, m, &so), "sgd");
  check(ddp_strategy_setup_module(s, m), "setup_module");

  float *xs = malloc(numel * sizeof(float));
  int64_t *ys = malloc((size_t)shape[0] * sizeof(int64_t));
  unsigned int seed = 1u + (unsigned int)ddp_strategy_global_rank(s);
  for (size_t i = 0; i < numel; ++i) xs[i] = (float)rand_r(&seed) / RAND_MAX * 2.0f - 1.0f;
  for (int64_t i = 0; i < shape[0]; ++i) ys[i] = rand_r(&seed) % 10;
  ddp_tensor *x = NULL, *y = NULL;
  check(ddp_tensor_from_blob(&x, xs, DDP_FLOAT32, shape, ndim), "x");
  check(ddp_tensor_from_blob(&y, ys, DDP_INT64, shape, 1), "y");

  int print_losses = getenv("BENCH_PRINT_LOSSES") && !strcmp(getenv("BENCH_PRINT_LOSSES"), "1");
  double *ms = malloc((size_t)(steps + 3) * sizeof(double));
  int kept = 0;
  for (int step = 0; step < steps + 3; ++step) {
    check(ddp_strategy_barrier(s, NULL), "barrier");  /* steps start together, as in the peers */
    double t0 = now_ms();
    ddp_tensor *out = NULL, *loss = NULL;
    check(ddp_optimizer_zero_grad(opt), "zero_grad");
    check(ddp_strategy_forward(s, m, x, &out), "forward");
    check(ddp_loss_cross_entropy(out, y, &loss), "loss");
    check(ddp_strategy_backward(s, loss), "backward");
    check(ddp_strategy_optimizer_step(s, opt), "optimizer_step");
    double el = now_ms() - t0;
    if (print_losses && ddp_strategy_is_global_zero(s)) {
      float l = 0;
      check(ddp_tensor_copy_to(loss, &l, sizeof l), "loss");
      printf("loss %d %.9g\n", step, (double)l);
    }
    ddp_tensor_free(out);
    ddp_tensor_free(loss);
    if (step >= 3) ms[kept++] = el;
  }
  qsort(ms, (size_t)kept, sizeof(double), by_value);
  const char *cache_mb = getenv("DDP_HOST_CACHE_MB");
  int nocache = cache_mb && !strcmp(cache_mb, "0");
  if (ddp_strategy_is_global_zero(s))
    printf("{\"impl\": \"libddp-strategy%s%s\", \"model\": \"%s\", \"batch\": %lld, \"step_ms_p50\": %.2f, "
           "\"step_ms_p90\": %.2f}\n",
           nocache ? "-nocache" : "", ddp_strategy_world_size(s) == 1 ? "-1rank" : "", name, (long long)shape[0],
           ms[kept / 2], ms[kept * 9 / 10]);
  ddp_tensor_free(x);
  ddp_tensor_free(y);
  ddp_optimizer_free(opt);
  ddp_module_free(m);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  free(xs);
  free(ys);
  free(ms);
  return 0;
}
