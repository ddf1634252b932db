/*
 * Time from a launch call to the first completed barrier.
 *   bench_launch spawn popen|fork N : ddp_spawn from this program
 *   bench_launch worker             : one rank started by a launcher (ddprun)
 * Rank 0 prints the CLOCK_MONOTONIC time (ns, as bench/mono_ns prints it) at
 * which its first barrier completed; for spawn the program prints
 * launch-to-barrier in ms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ddp/ddp.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int join_and_barrier(int rank, ddp_worker *w) {
  ddp_group *g = NULL;
  if (ddp_group_init(&g, NULL, NULL) != DDP_OK || ddp_barrier(g) != DDP_OK) {
    fprintf(stderr, "rank %d: %s\n", rank, ddp_last_error_message());
    return 1;
  }
  long long t = now_ns();
  if (rank == 0) {
    if (w) ddp_worker_set_result(w, &t, sizeof t);
    else printf("barrier_ns=%lld\n", t);
  }
  ddp_group_free(g);
  return 0;
}

static int worker_fn(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  return join_and_barrier(ddp_worker_rank(w), w);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "worker")) {
    const char *r = getenv("RANK");
    return join_and_barrier(r ? atoi(r) : 0, NULL);
  }
  if (argc < 4) {
    fprintf(stderr, "usage: bench_launch spawn popen|fork N | worker\n");
    return 2;
  }
  ddp_spawn_options o = DDP_SPAWN_OPTIONS_INIT;
  o.start_method = strcmp(argv[2], "fork") ? DDP_START_POPEN : DDP_START_FORK;
  o.nprocs = atoi(argv[3]);
  ddp_buffer *res = NULL;
  long long t0 = now_ns();
  if (ddp_spawn(&o, worker_fn, NULL, 0, &res) != DDP_OK || ddp_buffer_size(res) != sizeof(long long)) {
    fprintf(stderr, "spawn: %s\n", ddp_last_error_message());
    return 1;
  }
  long long t1;
  memcpy(&t1, ddp_buffer_data(res), sizeof t1);
  printf("launch_to_barrier_ms=%.1f\n", (t1 - t0) / 1e6);
  ddp_buffer_free(res);
  return 0;
}
