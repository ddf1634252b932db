/*
 * The training-surface job (issue 24) from C, on 2 ranks the strategy
 * starts itself (DDPStrategy's popen launcher): a module with two inputs and
 * a dict of two outputs, a composite loss written with the C arithmetic
 * (cross entropy with class weights, ignore_index and label smoothing, plus
 * 0.1 x MSE), SGD with momentum in two parameter groups (weight decay on
 * the weights; none, and another learning rate, on biases and the norm),
 * dropout seeded by seed_everything(42), and a checkpoint of it all; then an evaluation without gradients in which rank 0
 * runs 3 batches and rank 1 one (the unrepeated sampler's indices, uneven
 * batch sizes), a named method (`embed`), and the evaluation loss as a
 * sync_dist metric. Every value is printed as a hex float, so that
 * test_surface_parity.py compares it bitwise with PyTorch DDP and Lightning
 * (surface_reference.py) on the same module and data.
 *
 *   surface_job DIR [STEPS [bench]]
 *
 * With "bench" (bench/run_surface_step.sh), only the training steps run and
 * each rank prints its mean step time over the steps after the first 20.
 *
 * Resuming a comm hook's state (SURFACE_HOOK=powersgd or batched: PowerSGD
 * of rank 1 from step 3, error feedback, warm start): only the training
 * steps run, dropout seeded per step, and each step prints the loss and a
 * checksum of the synchronised (compressed) gradients. SURFACE_STOP_AT=K
 * saves DIR/hook.ckpt after K steps and stops; SURFACE_RESUME=1 goes on
 * from it to STEPS.
 * DIR holds what export_surface.py writes; the checkpoint goes to
 * DIR/surface.ckpt. Each line: "rank R <what> <hex>".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ddp/ddp.h>

#include "job_util.h"

#define SIDE 4
#define CLASSES 3
#define REG 2
#define BATCH 16 /* global; 8 per rank */
#define EVAL_ROWS 9

static float xs[N * FEATURES], ss[N * SIDE], rs[N * REG];
static int64_t ys[N];

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Rows `rows` (n of them) of a row-major table with `width` columns, copied into `dst`. */
static void gather_rows(const float *src, int width, const int64_t *rows, int n, float *dst) {
  for (int i = 0; i < n; ++i) memcpy(dst + (size_t)i * width, src + (size_t)rows[i] * width, sizeof(float) * width);
}

static ddp_tensor *blob(void *data, ddp_dtype dt, int64_t rows, int64_t cols) {
  ddp_tensor *t = NULL;
  int64_t shape[2] = {rows, cols};
  check(ddp_tensor_from_blob(&t, data, dt, shape, cols > 0 ? 2 : 1), "from_blob");
  return t;
}

static ddp_tensor *output(ddp_outputs *o, const char *key) {
  ddp_tensor *t = NULL;
  check(ddp_outputs_get(o, key, &t), key);
  return t;
}

/* cross_entropy(logits, y, weight, ignore_index=-100, label_smoothing=0.1) */
static ddp_tensor *class_loss(ddp_tensor *logits, ddp_tensor *y, ddp_tensor *weight) {
  ddp_loss_options o = DDP_LOSS_OPTIONS_INIT(DDP_LOSS_CROSS_ENTROPY);
  o.weight = weight;
  o.label_smoothing = 0.1;
  ddp_tensor *l = NULL;
  check(ddp_loss_compute(&o, logits, y, &l), "cross entropy");
  return l;
}

/* The sum over every parameter's synchronised gradient, in double. */
static double grad_checksum(ddp_module *m) {
  double total = 0;
  for (size_t k = 0; k < ddp_module_state_count(m); ++k) {
    const char *name = NULL;
    int is_param = 0;
    check(ddp_module_state_name(m, k, &name, &is_param), "state_name");
    if (!is_param) continue;
    ddp_tensor *g = NULL, *sum = NULL;
    check(ddp_module_grad(m, name, &g), "grad");
    if (!g) continue;
    check(ddp_tensor_sum(g, NULL, 0, 0, &sum), "grad sum");
    double v = 0;
    check(ddp_tensor_item(sum, &v), "item");
    total += v;
    ddp_tensor_free(g);
    ddp_tensor_free(sum);
  }
  return total;
}

int main(int argc, char **argv) {
  job_name = "surface_job";
  if (argc < 2) {
    fprintf(stderr, "usage: surface_job DIR [STEPS]\n");
    return 2;
  }
  const int steps = argc > 2 ? atoi(argv[2]) : 12;
  const int bench = argc > 3 && strcmp(argv[3], "bench") == 0;
  const int warmup = 20;
  double started = 0;
  read_file(argv[1], "x.f32", xs, sizeof xs);
  read_file(argv[1], "s.f32", ss, sizeof ss);
  read_file(argv[1], "y.i64", ys, sizeof ys);
  read_file(argv[1], "r.f32", rs, sizeof rs);

  const char *hook_kind = getenv("SURFACE_HOOK");
  const int stop_at = getenv("SURFACE_STOP_AT") ? atoi(getenv("SURFACE_STOP_AT")) : 0;
  const int resume = getenv("SURFACE_RESUME") != NULL;
  ddp_comm_hook *hook = NULL;
  if (hook_kind) {
    ddp_powersgd_options po = DDP_POWERSGD_OPTIONS_INIT;
    po.start_powersgd_iter = 3;
    po.min_compression_rate = 0;
    po.batched = strcmp(hook_kind, "batched") == 0;
    check(ddp_comm_hook_powersgd(&hook, &po), "powersgd");
  }
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  so.comm_hook = hook;
  so.backend = getenv("SURFACE_BACKEND"); /* NULL: the default */
  so.timeout_ms = 60000;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s), world = ddp_strategy_world_size(s);

  char path[4096];
  snprintf(path, sizeof path, "%s/two_heads.pt", argv[1]);
  ddp_module *m = NULL;
  check(ddp_module_load(&m, path), "module_load");
  check(ddp_strategy_setup_module(s, m), "setup_module");
  ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
  sgd.lr = 0.05;
  sgd.momentum = 0.9;
  sgd.weight_decay = 1e-4;
  /* [{"params": the rest}, {"params": biases and the norm, "weight_decay": 0, "lr": 0.08}] */
  const char *no_decay[] = {"*.bias", "norm.*"};
  ddp_param_group groups[2] = {DDP_PARAM_GROUP_INIT, DDP_PARAM_GROUP_INIT};
  groups[1].patterns = no_decay;
  groups[1].num_patterns = 2;
  groups[1].weight_decay = 0;
  groups[1].lr = 0.08;
  ddp_optimizer *opt = NULL;
  check(ddp_optimizer_new_sgd_groups(&opt, m, &sgd, groups, 2), "optimizer");
  check(ddp_seed_everything(42, 0, NULL), "seed_everything");
  char ckpt[4096];
  snprintf(ckpt, sizeof ckpt, "%s/hook.ckpt", argv[1]);
  int first = 0;
  if (resume) {
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    check(ddp_strategy_load_checkpoint_v2(s, ckpt, m, &opt, 1, NULL, 0, &info, NULL), "resume");
    first = (int)info.step;
  }

  float class_weight[CLASSES] = {1.0f, 2.0f, 0.5f};
  ddp_tensor *weight = blob(class_weight, DDP_FLOAT32, CLASSES, 0);
  const int per_rank = BATCH / world;
  for (int step = first; step < steps; ++step) {
    if (hook && step == stop_at && stop_at > 0) {
      ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
      info.step = step;
      check(ddp_strategy_save_checkpoint_v2(s, ckpt, m, &opt, 1, NULL, 0, &info), "save at stop");
      break;
    }
    if (hook) check(ddp_seed_everything(1000 + step, 0, NULL), "seed per step");
    if (step == warmup) started = now_ms();
    int64_t rows[BATCH];
    for (int i = 0; i < per_rank; ++i) rows[i] = (step * BATCH + rank * per_rank + i) % N;
    float bx[BATCH * FEATURES], bs[BATCH * SIDE], br[BATCH * REG];
    int64_t by[BATCH];
    gather_rows(xs, FEATURES, rows, per_rank, bx);
    gather_rows(ss, SIDE, rows, per_rank, bs);
    gather_rows(rs, REG, rows, per_rank, br);
    for (int i = 0; i < per_rank; ++i) by[i] = ys[rows[i]];
    ddp_tensor *in[2] = {blob(bx, DDP_FLOAT32, per_rank, FEATURES), blob(bs, DDP_FLOAT32, per_rank, SIDE)};
    ddp_tensor *y = blob(by, DDP_INT64, per_rank, 0), *r = blob(br, DDP_FLOAT32, per_rank, REG);
    ddp_outputs *out = NULL;
    check(ddp_strategy_call(s, m, NULL, (const ddp_tensor *const *)in, 2, &out), "strategy_call");
    ddp_tensor *logits = output(out, "logits"), *reg = output(out, "reg");
    ddp_tensor *ce = class_loss(logits, y, weight), *mse = NULL, *scaled = NULL, *loss = NULL;
    check(ddp_loss_mse(reg, r, &mse), "mse");
    check(ddp_tensor_binary_scalar(DDP_OP_MUL, mse, 0.1, &scaled), "0.1 * mse");
    check(ddp_tensor_binary(DDP_OP_ADD, ce, scaled, &loss), "ce + 0.1 * mse");
    check(ddp_optimizer_zero_grad(opt), "zero_grad");
    check(ddp_strategy_backward(s, loss), "backward");
    check(ddp_strategy_optimizer_step(s, opt), "optimizer_step");
    double v = 0;
    check(ddp_tensor_item(loss, &v), "item");
    if (!bench) printf("rank %d step %d loss %a\n", rank, step, v);
    if (hook) printf("rank %d step %d grads %a\n", rank, step, grad_checksum(m));
    ddp_tensor *all[] = {in[0], in[1], y, r, logits, reg, ce, mse, scaled, loss};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) ddp_tensor_free(all[i]);
    ddp_outputs_free(out);
  }

  if (hook) {
    fflush(stdout);
    check(ddp_strategy_teardown(s), "teardown");
    ddp_comm_hook_free(hook);
    return 0;
  }
  if (bench) {
    if (steps > warmup) printf("rank %d step_ms %.4f\n", rank, (now_ms() - started) / (steps - warmup));
    fflush(stdout);
    check(ddp_strategy_teardown(s), "teardown");
    return 0;
  }

  /* Evaluation: no graph, no collective in the forwards. Rank 0 runs 3
   * batches of 2, rank 1 one batch of 4, over the unrepeated sampler's
   * indices of the first EVAL_ROWS rows (5 and 4 of them). */
  check(ddp_grad_set_enabled(0, NULL), "no_grad");
  check(ddp_module_train(m, 0), "eval mode");
  ddp_sampler_options sam = DDP_SAMPLER_OPTIONS_INIT;
  sam.shuffle = 0;
  sam.unrepeated = 1;
  int64_t idx[EVAL_ROWS];
  size_t count = 0;
  check(ddp_sampler_indices(EVAL_ROWS, world, rank, 0, &sam, idx, EVAL_ROWS, &count), "sampler");
  const int eval_batch = rank == 0 ? 2 : 4;
  ddp_metric *metric = NULL;
  check(ddp_metric_new(&metric, DDP_METRIC_MEAN), "metric_new");
  int batches = 0;
  for (size_t at = 0; at < count && batches < (rank == 0 ? 3 : 1); at += eval_batch, ++batches) {
    int n = (int)(count - at < (size_t)eval_batch ? count - at : (size_t)eval_batch);
    float bx[EVAL_ROWS * FEATURES], bs[EVAL_ROWS * SIDE];
    int64_t by[EVAL_ROWS];
    gather_rows(xs, FEATURES, idx + at, n, bx);
    gather_rows(ss, SIDE, idx + at, n, bs);
    for (int i = 0; i < n; ++i) by[i] = ys[idx[at + i]] < 0 ? 0 : ys[idx[at + i]];
    ddp_tensor *in[2] = {blob(bx, DDP_FLOAT32, n, FEATURES), blob(bs, DDP_FLOAT32, n, SIDE)};
    ddp_tensor *y = blob(by, DDP_INT64, n, 0);
    ddp_outputs *out = NULL, *emb = NULL;
    check(ddp_strategy_call(s, m, "forward", (const ddp_tensor *const *)in, 2, &out), "eval call");
    ddp_tensor *logits = output(out, "logits"), *ce = class_loss(logits, y, weight), *e = NULL, *esum = NULL;
    if (ddp_tensor_requires_grad(ce)) {
      fprintf(stderr, "surface_job: the evaluation loss has an autograd graph under no_grad\n");
      return 2;
    }
    check(ddp_strategy_call(s, m, "embed", (const ddp_tensor *const *)in, 1, &emb), "embed");
    check(ddp_outputs_at(emb, 0, &e), "embed output");
    check(ddp_tensor_sum(e, NULL, 0, 0, &esum), "embed sum");
    double v = 0, ev = 0;
    check(ddp_tensor_item(ce, &v), "item");
    check(ddp_tensor_item(esum, &ev), "item");
    check(ddp_metric_update(metric, v, n), "metric update");
    printf("rank %d eval %d loss %a\nrank %d eval %d embed %a\n", rank, batches, v, rank, batches, ev);
    ddp_tensor *all[] = {in[0], in[1], y, logits, ce, e, esum};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) ddp_tensor_free(all[i]);
    ddp_outputs_free(out);
    ddp_outputs_free(emb);
  }
  double local = 0, synced = 0;
  check(ddp_metric_compute(metric, NULL, &local), "metric local");
  check(ddp_metric_compute(metric, s, &synced), "metric sync_dist");
  printf("rank %d metric local %a\nrank %d metric sync_dist %a\n", rank, local, rank, synced);
  fflush(stdout);

  ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
  info.step = steps;
  snprintf(path, sizeof path, "%s/surface.ckpt", argv[1]);
  check(ddp_strategy_save_checkpoint_v2(s, path, m, &opt, 1, NULL, 0, &info), "save_checkpoint");

  ddp_metric_free(metric);
  ddp_tensor_free(weight);
  ddp_optimizer_free(opt);
  ddp_module_free(m);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  return 0;
}
