/* What caller memory (ddp_tensor_from_blob, every binding's buffers) costs a
 * collective against a tensor libddp owns (ddp_tensor_new): an all-reduce of
 * the same size on each, alternating, blocking and async (started, then
 * waited). Where a backend's threads cannot be stopped (Gloo, and what shm
 * hands to Gloo) libddp works on a copy of caller memory; shm performs its
 * own calls on it in place (comm/caller_memory.h). Prints, on rank 0, one
 * line per mode and size: p50 of 31 calls each and their ratio.
 * Run under a launcher (bench/run_caller_memory.sh): argv[1] is the backend,
 * argv[2] (optional) the name its lines carry. */
#include <ddp/ddp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}
static int all_reduce(ddp_group *g, ddp_tensor *t, int async) {
  if (!async) return ddp_all_reduce(g, t, DDP_SUM);
  ddp_work *w = NULL;
  ddp_status st = ddp_all_reduce_async(g, t, DDP_SUM, &w);
  if (st == DDP_OK) st = ddp_work_wait(w, -1);
  ddp_work_free(w);
  return st;
}

enum { kCalls = 31 };

int main(int argc, char **argv) {
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.backend = argc > 1 ? argv[1] : "shm";
  ddp_group *g = NULL;
  if (ddp_group_init(&g, NULL, &o) != DDP_OK) {
    fprintf(stderr, "group: %s\n", ddp_last_error_message());
    return 1;
  }
  const int rank = ddp_group_rank(g);
  const char *label = argc > 2 ? argv[2] : o.backend;
  const ddp_device cpu = DDP_DEVICE_CPU_INIT;
  for (int async = 0; async < 2; ++async)
    for (int64_t n = 1 << 10; n <= (int64_t)4 << 20; n *= 16) {
      float *buf = malloc((size_t)n * sizeof(float));
      for (int64_t i = 0; i < n; ++i) buf[i] = 1.0f;
      ddp_tensor *blob = NULL, *own = NULL;
      if (!buf || ddp_tensor_from_blob(&blob, buf, DDP_FLOAT32, &n, 1) != DDP_OK ||
          ddp_tensor_new(&own, DDP_FLOAT32, &n, 1, cpu) != DDP_OK) {
        fprintf(stderr, "tensors: %s\n", ddp_last_error_message());
        return 1;
      }
      double on_blob[kCalls], on_own[kCalls];
      for (int c = 0; c < kCalls; ++c)
        for (int k = 0; k < 2; ++k) {
          const double t0 = now_s();
          if (all_reduce(g, k ? own : blob, async) != DDP_OK) {
            fprintf(stderr, "all_reduce: %s\n", ddp_last_error_message());
            return 1;
          }
          (k ? on_own : on_blob)[c] = now_s() - t0;
        }
      qsort(on_blob, kCalls, sizeof(double), by_value);
      qsort(on_own, kCalls, sizeof(double), by_value);
      if (rank == 0)
        printf("%-10s %-8s %9lld B  caller memory %9.1f us  owned %9.1f us  ratio %.2f\n", label,
               async ? "async" : "blocking", (long long)(n * 4), on_blob[kCalls / 2] * 1e6,
               on_own[kCalls / 2] * 1e6, on_blob[kCalls / 2] / on_own[kCalls / 2]);
      ddp_tensor_free(blob);
      ddp_tensor_free(own);
      free(buf);
    }
  ddp_group_free(g);
  return 0;
}
