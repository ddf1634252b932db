/*
 * Step time and bytes on the wire for every comm hook, on a
 * communication-bound model: caller-owned gradients of LAYERS weight
 * matrices (DIM x DIM float32) and their biases, no compute beyond refilling
 * the gradients. One rank per process; the environment names the group
 * (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK).
 *   bench_hooks <iface> [steps] [dim] [layers]
 * iface: the network interface the ranks talk over (lo, or a veth); rank 0
 * reads its transmit counter around the timed steps. Rank 0 prints one JSON
 * line per hook. The backend is Gloo (BENCH_BACKEND overrides it), as the
 * PyTorch peer's: the shm default would find both network namespaces on one
 * host and never touch the link this measures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ddp/ddp.h>

#define CHECK(call)                                                                   \
  do {                                                                                \
    ddp_status s_ = (call);                                                           \
    if (s_ != DDP_OK) {                                                               \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ddp_status_string(s_), ddp_last_error_message()); \
      exit(1);                                                                        \
    }                                                                                 \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long long tx_bytes(const char *iface) {
  char path[256];
  snprintf(path, sizeof path, "/sys/class/net/%s/statistics/tx_bytes", iface);
  FILE *f = fopen(path, "r");
  long long v = -1;
  if (f) {
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
  }
  return v;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

enum { WARMUP = 3 }; /* PowerSGD starts compressing at step 2 (its minimum with error feedback) */

static ddp_comm_hook *make_hook(const char *name) {
  ddp_comm_hook *h = NULL, *inner = NULL;
  ddp_powersgd_options o = DDP_POWERSGD_OPTIONS_INIT;
  o.start_powersgd_iter = 2;
  if (!strcmp(name, "allreduce")) CHECK(ddp_comm_hook_allreduce(&h));
  else if (!strcmp(name, "fp16")) CHECK(ddp_comm_hook_fp16_compress(&h));
  else if (!strcmp(name, "bf16")) CHECK(ddp_comm_hook_bf16_compress(&h));
  else if (!strcmp(name, "noop")) CHECK(ddp_comm_hook_noop(&h));
  else if (!strcmp(name, "powersgd_r1")) CHECK(ddp_comm_hook_powersgd(&h, &o));
  else if (!strcmp(name, "powersgd_r4")) {
    o.matrix_approximation_rank = 4;
    CHECK(ddp_comm_hook_powersgd(&h, &o));
  } else if (!strcmp(name, "batched_powersgd_r1")) {
    o.batched = 1;
    CHECK(ddp_comm_hook_powersgd(&h, &o));
  } else if (!strcmp(name, "fp16_powersgd_r1")) {
    CHECK(ddp_comm_hook_powersgd(&inner, &o));
    CHECK(ddp_comm_hook_wrap_fp16(&h, inner));
    ddp_comm_hook_free(inner);
  } else if (!strcmp(name, "post_localsgd")) {
    /* after the warm-up: each rank is its own "node" subgroup here, so no gradient traffic */
    CHECK(ddp_comm_hook_post_localsgd(&h, NULL, WARMUP, 1));
  }
  return h;
}

int main(int argc, char **argv) {
  const char *iface = argc > 1 ? argv[1] : "lo";
  int steps = argc > 2 ? atoi(argv[2]) : 10;
  int64_t dim = argc > 3 ? atoll(argv[3]) : 1024;
  int layers = argc > 4 ? atoi(argv[4]) : 8;
  static const char *hooks[] = {"allreduce", "fp16", "bf16", "powersgd_r1", "powersgd_r4", "batched_powersgd_r1",
                                "post_localsgd", "noop", "fp16_powersgd_r1"};
  ddp_group *g = NULL;
  ddp_group_options go = DDP_GROUP_OPTIONS_INIT;
  go.backend = getenv("BENCH_BACKEND") ? getenv("BENCH_BACKEND") : "gloo";
  CHECK(ddp_group_init(&g, NULL, &go));
  int rank = ddp_group_rank(g);
  size_t n = 2 * (size_t)layers;
  float **data = calloc(n, sizeof *data), **fresh = calloc(n, sizeof *fresh);
  ddp_tensor **grads = calloc(n, sizeof *grads);
  int64_t numel_total = 0;
  srand(1 + rank);
  for (size_t i = 0; i < n; ++i) {
    int64_t shape[2] = {dim, dim};
    size_t ndim = i % 2 ? 1 : 2, numel = i % 2 ? (size_t)dim : (size_t)(dim * dim);
    data[i] = malloc(numel * sizeof(float));
    fresh[i] = malloc(numel * sizeof(float));
    for (size_t k = 0; k < numel; ++k) fresh[i][k] = (float)rand() / RAND_MAX - 0.5f;
    numel_total += (int64_t)numel;
    CHECK(ddp_tensor_from_blob(&grads[i], data[i], DDP_FLOAT32, shape, ndim));
  }
  for (size_t h = 0; h < sizeof hooks / sizeof *hooks; ++h) {
    ddp_reducer_options ro = DDP_REDUCER_OPTIONS_INIT;
    ro.broadcast_parameters = 0;
    ddp_reducer *r = NULL;
    CHECK(ddp_reducer_new(&r, g, NULL, grads, n, &ro));
    ddp_comm_hook *hook = make_hook(hooks[h]);
    CHECK(ddp_reducer_set_comm_hook(r, hook));
    double *ms = calloc((size_t)steps, sizeof *ms);
    long long tx0 = 0;
    for (int s = 0; s < WARMUP + steps; ++s) {
      if (s == WARMUP) {
        CHECK(ddp_barrier(g));
        tx0 = tx_bytes(iface);
      }
      double t0 = now_ms();
      for (size_t i = n; i-- > 0;) { /* backward order: last layer first */
        memcpy(data[i], fresh[i], (size_t)ddp_tensor_nbytes(grads[i]));
        CHECK(ddp_reducer_mark_ready(r, i));
      }
      CHECK(ddp_reducer_finish(r));
      if (s >= WARMUP) ms[s - WARMUP] = now_ms() - t0;
    }
    long long tx = tx_bytes(iface) - tx0;
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    ddp_compression_stats cs = {0, 0, 0};
    int has_stats = ddp_comm_hook_compression_stats(hook, &cs) == DDP_OK;
    if (rank == 0)
      printf("{\"hook\": \"%s\", \"impl\": \"libddp\", \"iface\": \"%s\", \"params\": %lld, \"steps\": %d, \"step_ms_p50\": %.3f, "
             "\"step_ms_min\": %.3f, \"tx_bytes_per_step\": %.0f, \"compression_rate\": %.3f}\n",
             hooks[h], iface, (long long)numel_total, steps, ms[steps / 2], ms[0], tx0 >= 0 ? (double)tx / steps : -1.0,
             has_stats && cs.numel_after ? (double)cs.numel_before / (double)cs.numel_after : 0.0);
    fflush(stdout);
    free(ms);
    ddp_comm_hook_free(hook);
    ddp_reducer_free(r);
    CHECK(ddp_barrier(g));
  }
  for (size_t i = 0; i < n; ++i) {
    ddp_tensor_free(grads[i]);
    free(data[i]);
    free(fresh[i]);
  }
  free(grads);
  free(data);
  free(fresh);
  ddp_group_free(g);
  return 0;
}
