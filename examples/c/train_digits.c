/*
 * The main job: an MLP trained on scikit-learn's handwritten digits, from C,
 * through libddp's strategy, on N CPU processes. They are started with
 * ddp_spawn (--launcher spawn, the default: DDPSpawnStrategy, rank 0's result
 * comes back to this process) or by the strategy itself (--launcher popen:
 * DDPStrategy; this process is rank 0 and runs the program again for the
 * others, which is also what runs under ddprun or torchrun).
 *
 *   train_digits DATA_DIR [--world N] [--launcher spawn|popen] [--epochs E] [--resume] [--ckpt PATH]
 *                         [--find-unused]  (DDP's find_unused_parameters)
 *                         [--accumulate K] (Lightning's accumulate_grad_batches: the loss
 *                                           divided by K, gradients synced and the optimizer
 *                                           stepped every K batches and at the epoch's last)
 *                         [--comm-hook fp16|bf16] (PyTorch's fp16/bf16_compress_hook)
 *                         [--accelerator cpu|cuda] (cuda: each rank on cuda:LOCAL_RANK, NCCL)
 *                         [--gradient-as-bucket-view] (DDP's gradient_as_bucket_view)
 *                         [--post-localsgd START --averaging-period P]
 *                         [--precision P] (Lightning's precision: 32-true, bf16-mixed, 16-mixed, ...)
 *                         [--clip V [--clip-algorithm norm|value]] (gradient_clip_val / _algorithm)
 *                         [--static-graph] (DDP's static_graph)
 *                         [--sync-batchnorm] (Lightning's sync_batchnorm; for a model exported with --batchnorm)
 *                         [--devices-auto] (with --launcher popen: devices 0, "auto", in place of --world)
 *                         [--optimizer sgd|adamw] (adamw: AdamW, lr 0.001, weight decay 0.01)
 *                         [--warmup-cosine W] (LinearLR from 0.1x over W steps, then CosineAnnealingLR
 *                                              to the last step, in a SequentialLR stepped per step)
 *                         [--export PATH] (the trained model as TorchScript, for torch.jit.load)
 *                         [--stop-after K] (stop after epoch K of the --epochs the schedule is planned for)
 *                         [--ckpt-dir DIR [--keep-last K] [--every-n-steps N]]
 *                                          (Lightning's ModelCheckpoint(dirpath=DIR, save_top_k=K) and
 *                                           ckpt_path="last": a checkpoint in DIR at each epoch's end and
 *                                           every N optimizer steps, the newest K kept; the job resumes
 *                                           from the newest one every rank can load whenever DIR has
 *                                           one, e.g. when ddprun --max-restarts starts it again)
 *                                          (post-local SGD: global all-reduces for START steps,
 *                                           then within each node only, the parameters
 *                                           averaged over every rank each P steps from START)
 *
 * DATA_DIR holds what examples/digits/export_digits.py writes: the 80/20
 * split as raw arrays and the TorchScript MLP 64-128-64-10. Settings are
 * Lightning's run of the same job: SGD (lr 0.05, momentum 0.9), batch 32 per
 * rank, DistributedSampler order (shuffle, seed 0). Rank 0 prints one line
 * per epoch, saves a checkpoint at the end of each epoch (Lightning's layout,
 * the model's names under "net." as the LightningModule of
 * bench/digits_lightning.py has them), and the held-out accuracy comes back
 * as the job's result. --resume continues from the checkpoint where it
 * stopped, also from one that Lightning wrote. With DIGITS_STEP_LOG=FILE, rank 0 writes each
 * step's loss there (the Lightning parity test compares them). With
 * DIGITS_FAIL_RANK=R, rank R exits with code 3 in epoch 2 (the tests check
 * that every other rank stops with a status naming it). With DIGITS_KILL_RANK=R
 * and DIGITS_KILL_AT_STEP=S, rank R sends itself SIGKILL after optimizer step
 * S of a first start (TORCHELASTIC_RESTART_COUNT unset or 0); DIGITS_STEP_SLEEP_MS=M
 * makes every step M ms longer (for tests that act while it trains); the
 * SIGKILL line and, after a resume, a "first step after the resume" line
 * carry the wall clock (bench/run_restart.sh). With --ckpt-dir,
 * the step log is appended to, one line per batch: "EPOCH BATCH LOSS".
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ddp/ddp.h>

#define FEATURES 64
#define CLASSES 10

/* Sent to the workers as bytes (a popen worker is another process): no pointers. */
typedef struct {
  char dir[2048];
  char ckpt[2048];
  int epochs;
  int batch;
  double lr;
  double momentum;
  int resume;
  int find_unused;
  int accumulate; /* Lightning's accumulate_grad_batches */
  char comm_hook[8]; /* "", "fp16" or "bf16" */
  int cuda;
  int bucket_view;
  int64_t localsgd_start; /* -1: no post-local SGD */
  int64_t averaging_period;
  char precision[16]; /* "": 32-true */
  double clip;        /* 0: off */
  int clip_by_value;
  int static_graph;
  int sync_batchnorm;
  int adamw;
  int64_t warmup; /* 0: no schedule; else LinearLR warmup steps before the cosine */
  char export_path[2048];
  int stop_after; /* 0: run every epoch */
  char ckpt_dir[2048]; /* "": the single --ckpt file */
  int keep_last;
  int64_t every_steps; /* 0: at epochs' ends only */
} job_args;

typedef struct {
  float *x;
  int64_t *y;
  int64_t n;
} dataset;

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *read_file(const char *dir, const char *name, size_t *len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "train_digits: cannot open %s (run examples/digits/export_digits.py first)\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc(size > 0 ? (size_t)size : 1);
  if (!buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
    fprintf(stderr, "train_digits: cannot read %s\n", path);
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *len = (size_t)size;
  return buf;
}

static int load_split(const char *dir, const char *which, dataset *d) {
  char xname[64], yname[64];
  size_t xlen = 0, ylen = 0;
  snprintf(xname, sizeof xname, "%s_x.f32", which);
  snprintf(yname, sizeof yname, "%s_y.i64", which);
  d->x = read_file(dir, xname, &xlen);
  d->y = read_file(dir, yname, &ylen);
  if (!d->x || !d->y) return 0;
  d->n = (int64_t)(ylen / sizeof(int64_t));
  if (xlen != (size_t)d->n * FEATURES * sizeof(float)) {
    fprintf(stderr, "train_digits: %s: %zu feature bytes for %lld labels\n", which, xlen, (long long)d->n);
    return 0;
  }
  return 1;
}

/* Reports a failed call with its status and message; every call below goes through it. */
static int ok(ddp_status s, const char *what, int rank) {
  if (s == DDP_OK) return 1;
  fprintf(stderr, "[rank %d] %s: %s: %s\n", rank, what, ddp_status_string(s), ddp_last_error_message());
  return 0;
}
#define CHECK(call) \
  do { \
    if (!ok((call), #call, rank)) goto done; \
  } while (0)

/* Correct predictions of logits (n x CLASSES) against labels. */
static int64_t count_correct(const ddp_tensor *logits, const int64_t *labels, int64_t n, float *scratch) {
  if (ddp_tensor_copy_to(logits, scratch, (size_t)n * CLASSES * sizeof(float)) != DDP_OK) return -1;
  int64_t correct = 0;
  for (int64_t i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < CLASSES; ++c)
      if (scratch[i * CLASSES + c] > scratch[i * CLASSES + best]) best = c;
    correct += best == labels[i];
  }
  return correct;
}

/*
 * One rank's training. kind and devices are the strategy's; on global rank
 * 0, *result receives "<correct> <total>" of the held-out evaluation and
 * *is_zero is set.
 */
static int train_rank(const job_args *a, ddp_strategy_kind kind, int devices, char *result, size_t cap, int *is_zero) {
  /* Until setup says, the launcher's RANK names this process in messages. */
  const char *env_rank = getenv("RANK");
  int rank = env_rank ? atoi(env_rank) : 0, code = 1;
  dataset train_set = {0}, test_set = {0};
  ddp_strategy *s = NULL;
  ddp_module *m = NULL;
  ddp_optimizer *opt = NULL;
  ddp_lr_scheduler *warmup = NULL, *cosine = NULL, *sched = NULL;
  int64_t *indices = NULL;
  float *bx = NULL, *scratch = NULL;
  int64_t *by = NULL;
  ddp_buffer *user = NULL;
  FILE *step_log = NULL;
  char path[4096];
  if (!load_split(a->dir, "train", &train_set) || !load_split(a->dir, "test", &test_set)) goto done;

  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.kind = kind;
  so.devices = devices;
  so.accelerator = a->cuda ? DDP_DEVICE_CUDA : DDP_DEVICE_CPU;
  so.find_unused_parameters = a->find_unused;
  so.gradient_as_bucket_view = a->bucket_view;
  so.static_graph = a->static_graph;
  so.sync_batchnorm = a->sync_batchnorm;
  ddp_comm_hook *hook = NULL;
  if (!strcmp(a->comm_hook, "fp16")) CHECK(ddp_comm_hook_fp16_compress(&hook));
  if (!strcmp(a->comm_hook, "bf16")) CHECK(ddp_comm_hook_bf16_compress(&hook));
  /* NULL subgroup: one per node, made on the hook's first local step. */
  if (a->localsgd_start >= 0) CHECK(ddp_comm_hook_post_localsgd(&hook, NULL, a->localsgd_start, 1));
  so.model_averaging_period = a->averaging_period;
  so.precision = a->precision[0] ? a->precision : NULL;
  so.gradient_clip_val = a->clip;
  so.gradient_clip_algorithm = a->clip_by_value ? DDP_CLIP_VALUE : DDP_CLIP_NORM;
  so.comm_hook = hook;
  so.state_dict_prefix = "net.";
  ddp_status made = ddp_strategy_new(&s, &so);
  ddp_comm_hook_free(hook); /* the strategy holds its own reference */
  CHECK(made);
  CHECK(ddp_strategy_setup_environment(s));
  rank = ddp_strategy_global_rank(s);
  int world = ddp_strategy_world_size(s);
  if (rank == 0 && ddp_strategy_precision_warning(s)[0]) fprintf(stderr, "warning: %s\n", ddp_strategy_precision_warning(s));
  snprintf(path, sizeof path, "%s/mlp.pt", a->dir);
  CHECK(ddp_module_load(&m, path));
  CHECK(ddp_strategy_setup_module(s, m));
  if (rank == 0 && a->sync_batchnorm)
    printf("sync_batchnorm: %d batch norm(s) synchronised\n", ddp_strategy_sync_batchnorm_layers(s));
  if (a->adamw) {
    ddp_adam_options adamw = DDP_ADAMW_OPTIONS_INIT;
    CHECK(ddp_optimizer_new_adamw(&opt, m, &adamw));
  } else {
    ddp_sgd_options sgd = DDP_SGD_OPTIONS_INIT;
    sgd.lr = a->lr;
    sgd.momentum = a->momentum;
    CHECK(ddp_optimizer_new_sgd(&opt, m, &sgd));
  }
  int64_t per_rank = 0;
  CHECK(ddp_sampler_num_samples(train_set.n, world, 0, &per_rank));
  const int64_t batches = (per_rank + a->batch - 1) / a->batch;
  const int64_t steps_per_epoch = (batches + a->accumulate - 1) / a->accumulate;
  if (a->warmup > 0) {
    /* Warmup, then cosine to the end: Lightning's {"interval": "step"}. */
    ddp_lr_scheduler_options lin = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_LINEAR);
    lin.start_factor = 0.1;
    lin.total_iters = a->warmup;
    ddp_lr_scheduler_options cos = DDP_LR_SCHEDULER_OPTIONS_INIT(DDP_LR_COSINE_ANNEALING);
    cos.t_max = steps_per_epoch * a->epochs - a->warmup;
    CHECK(ddp_lr_scheduler_new(&warmup, opt, &lin));
    CHECK(ddp_lr_scheduler_new(&cosine, opt, &cos));
    ddp_lr_scheduler *both[2] = {warmup, cosine};
    CHECK(ddp_lr_scheduler_new_sequential(&sched, opt, both, 2, &a->warmup));
  }

  int64_t first_epoch = 0, opt_steps = 0, first_start = 0, first_start_step = -1;
  if (a->ckpt_dir[0]) {
    /* Whatever started this process again, it goes on from the newest checkpoint every rank can load. */
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    ddp_buffer *report = NULL;
    int resumed = 0;
    CHECK(ddp_strategy_resume_from_dir(s, a->ckpt_dir, &m, NULL, 1, &opt, 1, sched ? &sched : NULL, sched ? 1 : 0,
                                       &resumed, &info, &user, &report));
    if (resumed) {
      first_epoch = info.epoch;
      opt_steps = info.step;
      first_start = info.samples_in_epoch;
      first_start_step = info.step;
      if (rank == 0)
        printf("%.*s: epoch %lld, step %lld, %lld samples of the epoch done (by %lld ranks; now %d)\n",
               (int)ddp_buffer_size(report) - 1, (const char *)ddp_buffer_data(report), (long long)first_epoch + 1,
               (long long)opt_steps, (long long)first_start, (long long)info.world_size, world);
    }
    ddp_buffer_free(report);
  } else if (a->resume) {
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    CHECK(ddp_strategy_load_checkpoint_v2(s, a->ckpt, m, &opt, 1, sched ? &sched : NULL, sched ? 1 : 0, &info, &user));
    first_epoch = info.epoch;
    opt_steps = info.step;
    if (rank == 0)
      printf("resumed from %s after epoch %lld (step %lld)\n", a->ckpt, (long long)first_epoch - 1, (long long)opt_steps);
  }

  const char *log_path = getenv("DIGITS_STEP_LOG");
  if (rank == 0 && log_path && !(step_log = fopen(log_path, a->ckpt_dir[0] ? "a" : "w"))) {
    fprintf(stderr, "train_digits: cannot write %s\n", log_path);
    goto done;
  }
  indices = malloc((size_t)per_rank * sizeof *indices);
  bx = malloc((size_t)a->batch * FEATURES * sizeof *bx);
  by = malloc((size_t)a->batch * sizeof *by);
  int64_t most = train_set.n > test_set.n ? train_set.n : test_set.n;
  scratch = malloc((size_t)(most > a->batch ? most : a->batch) * CLASSES * sizeof *scratch);
  if (!indices || !bx || !by || !scratch) goto done;

  const char *fail_rank = getenv("DIGITS_FAIL_RANK");
  const char *kill_rank = getenv("DIGITS_KILL_RANK"), *kill_step = getenv("DIGITS_KILL_AT_STEP");
  const char *restarts = getenv("TORCHELASTIC_RESTART_COUNT");
  const char *step_sleep = getenv("DIGITS_STEP_SLEEP_MS");
  const long sleep_ms = step_sleep ? atol(step_sleep) : 0;
  const struct timespec pause = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  const int64_t kill_at = kill_rank && kill_step && atoi(kill_rank) == rank && (!restarts || !strcmp(restarts, "0"))
                              ? atoll(kill_step)
                              : -1;
  const int64_t last_epoch = a->stop_after > 0 && a->stop_after < a->epochs ? a->stop_after : a->epochs;
  for (int64_t epoch = first_epoch; epoch < last_epoch; ++epoch) {
    double t0 = now_s();
    if (fail_rank && atoi(fail_rank) == rank && epoch == 1) {
      fprintf(stderr, "[rank %d] failing on purpose (DIGITS_FAIL_RANK)\n", rank);
      exit(3);
    }
    size_t count = 0;
    /* A resumed epoch starts where its checkpoint stood, re-sharded if the world size changed. */
    ddp_sampler_options order = DDP_SAMPLER_OPTIONS_INIT;
    order.start = epoch == first_epoch ? first_start : 0;
    const int64_t skipped = order.start / ((int64_t)a->batch * world);
    CHECK(ddp_sampler_indices(train_set.n, world, rank, epoch, &order, indices, (size_t)per_rank, &count));
    double sums[3] = {0, 0, 0}; /* loss x samples, correct, samples */
    for (size_t at = 0, j = 0; at < count; at += (size_t)a->batch, ++j) {
      int64_t b = (int64_t)(count - at < (size_t)a->batch ? count - at : (size_t)a->batch);
      /* Lightning's accumulation: zero_grad at a window's first batch, sync
       * and step at its last (or the epoch's last batch). */
      int first_in_window = j % (size_t)a->accumulate == 0;
      int sync = (j + 1) % (size_t)a->accumulate == 0 || at + (size_t)a->batch >= count;
      for (int64_t i = 0; i < b; ++i) {
        int64_t k = indices[at + (size_t)i];
        memcpy(bx + i * FEATURES, train_set.x + k * FEATURES, FEATURES * sizeof(float));
        by[i] = train_set.y[k];
      }
      int64_t xshape[2] = {b, FEATURES}, yshape[1] = {b};
      ddp_tensor *x = NULL, *y = NULL, *logits = NULL, *loss = NULL, *scaled = NULL;
      ddp_status st = ddp_tensor_from_blob(&x, bx, DDP_FLOAT32, xshape, 2);
      if (st == DDP_OK) st = ddp_tensor_from_blob(&y, by, DDP_INT64, yshape, 1);
      if (st == DDP_OK) st = ddp_strategy_forward(s, m, x, &logits);
      if (st == DDP_OK) st = ddp_loss_cross_entropy(logits, y, &loss);
      if (st == DDP_OK) st = ddp_loss_scale(loss, 1.0 / a->accumulate, &scaled);
      if (st == DDP_OK && first_in_window) st = ddp_optimizer_zero_grad(opt);
      if (st == DDP_OK && !sync) st = ddp_strategy_block_backward_sync(s, 1);
      if (st == DDP_OK) st = ddp_strategy_backward(s, scaled);
      if (st == DDP_OK && !sync) st = ddp_strategy_block_backward_sync(s, 0);
      if (st == DDP_OK && sync) st = ddp_strategy_optimizer_step(s, opt);
      if (st == DDP_OK && sync && sched) st = ddp_lr_scheduler_step(sched);
      if (st == DDP_OK && sync) ++opt_steps;
      float l = 0;
      if (st == DDP_OK) st = ddp_tensor_copy_to(loss, &l, sizeof l);
      int64_t correct = st == DDP_OK ? count_correct(logits, by, b, scratch) : 0;
      ddp_tensor_free(x);
      ddp_tensor_free(y);
      ddp_tensor_free(logits);
      ddp_tensor_free(loss);
      ddp_tensor_free(scaled);
      CHECK(st);
      if (step_log && a->ckpt_dir[0]) fprintf(step_log, "%lld %lld %.9g\n", (long long)epoch, (long long)(skipped + (int64_t)j), (double)l);
      else if (step_log) fprintf(step_log, "%.9g\n", (double)l);
      if (step_log) fflush(step_log);
      if (sleep_ms > 0) nanosleep(&pause, NULL);
      if (rank == 0 && first_start_step >= 0 && opt_steps == first_start_step + 1 && sync) {
        printf("first step after the resume at %.6f\n", wall_s());
        fflush(stdout);
      }
      if (sync && opt_steps == kill_at) {
        fprintf(stderr, "[rank %d] SIGKILL to itself after step %lld (DIGITS_KILL_AT_STEP) at %.6f\n", rank,
                (long long)opt_steps, wall_s());
        raise(SIGKILL);
      }
      /* Inside the epoch (its end is saved below): every N optimizer steps. */
      if (sync && a->ckpt_dir[0] && a->every_steps > 0 && opt_steps % a->every_steps == 0 &&
          at + (size_t)a->batch < count) {
        ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
        info.step = opt_steps;
        info.epoch = epoch;
        info.batches_in_epoch = batches;
        info.samples_in_epoch = order.start + (int64_t)(j + 1) * a->batch * world;
        CHECK(ddp_strategy_save_checkpoint_to_dir(s, a->ckpt_dir, a->keep_last, &m, NULL, 1, &opt, 1,
                                                  sched ? &sched : NULL, sched ? 1 : 0, &info));
      }
      sums[0] += (double)l * (double)b;
      sums[1] += (double)correct;
      sums[2] += (double)b;
    }
    /* The epoch's figures over every rank (Lightning's sync_dist). */
    int64_t three[1] = {3};
    ddp_tensor *t = NULL;
    CHECK(ddp_tensor_from_blob(&t, sums, DDP_FLOAT64, three, 1));
    ddp_status st = ddp_strategy_reduce(s, t, DDP_SUM);
    ddp_tensor_free(t);
    CHECK(st);
    double seconds = now_s() - t0;
    if (rank == 0)
      printf("epoch %2lld  loss %.4f  accuracy %.4f  %.0f samples/s  (%.0f ms)\n", (long long)epoch + 1,
             sums[0] / sums[2], sums[1] / sums[2], sums[2] / seconds, seconds * 1000);
    fflush(stdout);
    /* Lightning's counters: epochs completed, optimizer steps, batches per epoch. */
    ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
    info.step = opt_steps;
    info.epoch = epoch + 1;
    info.batches_in_epoch = batches;
    if (a->ckpt_dir[0])
      CHECK(ddp_strategy_save_checkpoint_to_dir(s, a->ckpt_dir, a->keep_last, &m, NULL, 1, &opt, 1,
                                                sched ? &sched : NULL, sched ? 1 : 0, &info));
    else
      CHECK(ddp_strategy_save_checkpoint_v2(s, a->ckpt, m, &opt, 1, sched ? &sched : NULL, sched ? 1 : 0, &info));
  }
  if (a->export_path[0]) CHECK(ddp_strategy_save_module(s, a->export_path, m));

  /* Held-out accuracy: every rank evaluates the whole held-out set. */
  {
    int64_t xshape[2] = {test_set.n, FEATURES};
    ddp_tensor *x = NULL, *logits = NULL;
    CHECK(ddp_module_train(m, 0));
    CHECK(ddp_tensor_from_blob(&x, test_set.x, DDP_FLOAT32, xshape, 2));
    ddp_status st = ddp_module_forward(m, x, &logits);
    int64_t correct = st == DDP_OK ? count_correct(logits, test_set.y, test_set.n, scratch) : -1;
    ddp_tensor_free(x);
    ddp_tensor_free(logits);
    CHECK(st);
    if (rank == 0) {
      snprintf(result, cap, "%lld %lld %d", (long long)correct, (long long)test_set.n, world);
      *is_zero = 1;
    }
  }
  CHECK(ddp_strategy_teardown(s));
  code = 0;
done:
  if (step_log) fclose(step_log);
  ddp_buffer_free(user);
  ddp_lr_scheduler_free(sched);
  ddp_lr_scheduler_free(cosine);
  ddp_lr_scheduler_free(warmup);
  ddp_optimizer_free(opt);
  ddp_module_free(m);
  ddp_strategy_free(s);
  free(indices);
  free(bx);
  free(by);
  free(scratch);
  free(train_set.x);
  free(train_set.y);
  free(test_set.x);
  free(test_set.y);
  return code;
}

/* A ddp_spawn worker: one rank, its result handed back from rank 0. */
static int spawn_worker(ddp_worker *w, const void *arg, size_t arg_len) {
  (void)arg_len;
  char result[128] = {0};
  int is_zero = 0;
  int code = train_rank(arg, DDP_STRATEGY_DDP_SPAWN, 1, result, sizeof result, &is_zero);
  if (code == 0 && is_zero && ddp_worker_set_result(w, result, strlen(result)) != DDP_OK) code = 1;
  return code;
}

static int report(const char *text, double seconds, const char *ckpt) {
  long long correct = 0, total = 0;
  int world = 0; /* the job's, which a launcher may have made larger than --world */
  if (sscanf(text, "%lld %lld %d", &correct, &total, &world) != 3 || total == 0) {
    fprintf(stderr, "train_digits: rank 0 returned no result\n");
    return 1;
  }
  printf("held-out accuracy %.4f (%lld of %lld), %d processes, %.2f s from launch to result; checkpoint %s\n",
         (double)correct / (double)total, correct, total, world, seconds, ckpt);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s DATA_DIR [--world N] [--epochs E] [--resume] [--ckpt PATH]\n", argv[0]);
    return 2;
  }
  job_args a = {"", "", 20, 32, 0.05, 0.9, 0, 0, 1, "", 0, 0, -1, 0};
  int world = 2, popen = 0, devices_auto = 0;
  snprintf(a.dir, sizeof a.dir, "%s", argv[1]);
  snprintf(a.ckpt, sizeof a.ckpt, "%s/last.ckpt", argv[1]);
  for (int i = 2; i < argc; ++i) {
    if (!strcmp(argv[i], "--world") && i + 1 < argc) world = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--epochs") && i + 1 < argc) a.epochs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--ckpt") && i + 1 < argc) snprintf(a.ckpt, sizeof a.ckpt, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--resume")) a.resume = 1;
    else if (!strcmp(argv[i], "--ckpt-dir") && i + 1 < argc) snprintf(a.ckpt_dir, sizeof a.ckpt_dir, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--keep-last") && i + 1 < argc) a.keep_last = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--every-n-steps") && i + 1 < argc) a.every_steps = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--find-unused")) a.find_unused = 1;
    else if (!strcmp(argv[i], "--gradient-as-bucket-view")) a.bucket_view = 1;
    else if (!strcmp(argv[i], "--accumulate") && i + 1 < argc) a.accumulate = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--comm-hook") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "fp16") || !strcmp(argv[i + 1], "bf16")))
      snprintf(a.comm_hook, sizeof a.comm_hook, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--accelerator") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "cpu") || !strcmp(argv[i + 1], "cuda")))
      a.cuda = !strcmp(argv[++i], "cuda");
    else if (!strcmp(argv[i], "--post-localsgd") && i + 1 < argc) a.localsgd_start = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--averaging-period") && i + 1 < argc) a.averaging_period = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--devices-auto")) devices_auto = 1;
    else if (!strcmp(argv[i], "--static-graph")) a.static_graph = 1;
    else if (!strcmp(argv[i], "--sync-batchnorm")) a.sync_batchnorm = 1;
    else if (!strcmp(argv[i], "--optimizer") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "sgd") || !strcmp(argv[i + 1], "adamw")))
      a.adamw = !strcmp(argv[++i], "adamw");
    else if (!strcmp(argv[i], "--warmup-cosine") && i + 1 < argc) a.warmup = atoll(argv[++i]);
    else if (!strcmp(argv[i], "--stop-after") && i + 1 < argc) a.stop_after = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--export") && i + 1 < argc) snprintf(a.export_path, sizeof a.export_path, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--precision") && i + 1 < argc) snprintf(a.precision, sizeof a.precision, "%s", argv[++i]);
    else if (!strcmp(argv[i], "--clip") && i + 1 < argc) a.clip = atof(argv[++i]);
    else if (!strcmp(argv[i], "--clip-algorithm") && i + 1 < argc &&
             (!strcmp(argv[i + 1], "norm") || !strcmp(argv[i + 1], "value")))
      a.clip_by_value = !strcmp(argv[++i], "value");
    else if (!strcmp(argv[i], "--launcher") && i + 1 < argc && !strcmp(argv[i + 1], "popen")) popen = 1, ++i;
    else if (!strcmp(argv[i], "--launcher") && i + 1 < argc && !strcmp(argv[i + 1], "spawn")) popen = 0, ++i;
    else {
      fprintf(stderr, "train_digits: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (world < 1 || a.epochs < 0 || a.accumulate < 1 || a.warmup < 0 || a.keep_last < 0 || a.every_steps < 0) {
    fprintf(stderr, "train_digits: --world and --accumulate must be >= 1, --epochs, --warmup-cosine, --keep-last and "
                    "--every-n-steps >= 0\n");
    return 2;
  }
  double t0 = now_s();
  char text[128] = {0};
  if (popen) {
    /* DDPStrategy's popen: the strategy starts the other ranks from setup. */
    int is_zero = 0;
    int code = train_rank(&a, DDP_STRATEGY_DDP, devices_auto ? 0 : world, text, sizeof text, &is_zero);
    if (code != 0 || !is_zero) return code;
    return report(text, now_s() - t0, a.ckpt_dir[0] ? a.ckpt_dir : a.ckpt);
  }
  ddp_spawn_options so = DDP_SPAWN_OPTIONS_INIT;
  so.nprocs = world;
  ddp_buffer *result = NULL;
  ddp_status s = ddp_spawn(&so, spawn_worker, &a, sizeof a, &result);
  if (s != DDP_OK) {
    fprintf(stderr, "train_digits: %s: %s\n", ddp_status_string(s), ddp_last_error_message());
    return 1;
  }
  if (result) {
    size_t n = ddp_buffer_size(result);
    memcpy(text, ddp_buffer_data(result), n < sizeof text - 1 ? n : sizeof text - 1);
  }
  ddp_buffer_free(result);
  return report(text, now_s() - t0, a.ckpt_dir[0] ? a.ckpt_dir : a.ckpt);
}
