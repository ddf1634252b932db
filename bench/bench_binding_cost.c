/*
 * The C reference of bench/run_binding_cost.sh: per-call cost of a 4-byte
 * all-reduce and of a reducer step (GRADS gradients of GRAD_LEN floats,
 * each marked ready, then finish) on 2 ranks over libddp's default CPU
 * backend, started by ddprun. The Python, Java and Rust programs beside it
 * do the same calls through their bindings. Rank 0 prints one JSON line:
 * the median over BLOCKS blocks of CALLS calls, in microseconds per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ddp/ddp.h>

enum { GRADS = 4, GRAD_LEN = 256, CALLS = 2000, BLOCKS = 7, WARMUP = 200 };

#define CHECK(call)                                                                                       \
  do {                                                                                                    \
    ddp_status s_ = (call);                                                                               \
    if (s_ != DDP_OK) {                                                                                   \
      fprintf(stderr, "%s: %s: %s\n", #call, ddp_status_string(s_), ddp_last_error_message());           \
      exit(1);                                                                                            \
    }                                                                                                     \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static ddp_group *g;
static ddp_tensor *scalar;
static ddp_reducer *reducer;

static void all_reduce_once(void) { CHECK(ddp_all_reduce(g, scalar, DDP_SUM)); }

static void reducer_step_once(void) {
  for (size_t i = GRADS; i-- > 0;) CHECK(ddp_reducer_mark_ready(reducer, i));
  CHECK(ddp_reducer_finish(reducer));
}

/* Median microseconds per call of fn over BLOCKS blocks, the ranks lined up before each. */
static double median_us(void (*fn)(void)) {
  double per[BLOCKS];
  for (int i = 0; i < WARMUP; ++i) fn();
  for (int b = 0; b < BLOCKS; ++b) {
    CHECK(ddp_barrier(g));
    double t0 = now_us();
    for (int i = 0; i < CALLS; ++i) fn();
    per[b] = (now_us() - t0) / CALLS;
  }
  qsort(per, BLOCKS, sizeof *per, cmp);
  return per[BLOCKS / 2];
}

int main(void) {
  ddp_env *env = NULL;
  CHECK(ddp_env_detect(&env));
  CHECK(ddp_group_init(&g, env, NULL));
  ddp_env_free(env);
  float one = 1;
  int64_t n1 = 1, nlen = GRAD_LEN;
  static float grads[GRADS][GRAD_LEN];
  ddp_tensor *views[GRADS];
  CHECK(ddp_tensor_from_blob(&scalar, &one, DDP_FLOAT32, &n1, 1));
  for (int i = 0; i < GRADS; ++i) CHECK(ddp_tensor_from_blob(&views[i], grads[i], DDP_FLOAT32, &nlen, 1));
  ddp_reducer_options o = DDP_REDUCER_OPTIONS_INIT;
  o.broadcast_parameters = 0;
  CHECK(ddp_reducer_new(&reducer, g, NULL, views, GRADS, &o));
  double ar = median_us(all_reduce_once), step = median_us(reducer_step_once);
  if (ddp_group_rank(g) == 0) printf("{\"lang\": \"c\", \"allreduce_us\": %.3f, \"reducer_step_us\": %.3f}\n", ar, step);
  ddp_reducer_free(reducer);
  for (int i = 0; i < GRADS; ++i) ddp_tensor_free(views[i]);
  ddp_tensor_free(scalar);
  ddp_group_free(g);
  return 0;
}
