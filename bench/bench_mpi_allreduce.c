/* MPI_Allreduce of float32 (MPI_SUM, in place), timed the way
 * bench_allreduce times libddp and Gloo, so that the three share one table:
 * the same sizes (4 B times 4 up to BENCH_MAX_BYTES, else BENCH_MAX_MB MiB,
 * from BENCH_MIN_BYTES; BENCH_BYTES alone, exactly that size, a multiple of
 * 4), the same warm-up (2000 4-byte calls first), the same iterations per size, 3 warm-up calls, a
 * barrier before each of BENCH_ROUNDS rounds, and each call timed on its
 * own, as OSU's osu_allreduce does with MPI_Wtime. Rank 0 prints one JSON
 * line per size with p10, p50 and p90. Started by MPICH's own mpiexec:
 *   mpiexec -n 2 bench_mpi_allreduce
 * BENCH_OP=broadcast (MPI_Bcast from rank 0) or all_gather (MPI_Allgather,
 * `bytes` from each rank) times the other collectives the DDP path uses,
 * as bench_allreduce does under the same variable. */
#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return v ? strtol(v, NULL, 10) : fallback;
}

/* The same counts as bench_allreduce.cpp's iterations_for. */
static int iterations_for(size_t bytes) {
  if (bytes <= 64 * 1024) return 400;
  if (bytes <= (1u << 20)) return 100;
  if (bytes <= (16u << 20)) return 20;
  return 8;
}

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* The nearest-rank percentile bench_allreduce uses. */
static double pct(double* sorted, size_t n, double p) {
  size_t i = (size_t)(p * (double)(n - 1) + 0.5);
  return sorted[i < n ? i : n - 1];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  const int rounds = (int)env_long("BENCH_ROUNDS", 3);
  size_t max_bytes = (size_t)env_long("BENCH_MAX_MB", 64) << 20;
  if (getenv("BENCH_MAX_BYTES")) max_bytes = (size_t)strtoull(getenv("BENCH_MAX_BYTES"), NULL, 10);
  const size_t min_bytes = (size_t)env_long("BENCH_MIN_BYTES", 4);
  char label[64];
  snprintf(label, sizeof label, "mpich");
  const char* op = getenv("BENCH_OP") ? getenv("BENCH_OP") : "allreduce";
  const int bcast = strcmp(op, "broadcast") == 0, gather = strcmp(op, "all_gather") == 0;
  if (!bcast && !gather && strcmp(op, "allreduce") != 0) {
    fprintf(stderr, "BENCH_OP must be allreduce, broadcast or all_gather, not %s\n", op);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }

  size_t sizes[64], nsizes = 0;
  if (getenv("BENCH_BYTES")) {
    sizes[nsizes++] = (size_t)strtoull(getenv("BENCH_BYTES"), NULL, 10) / 4 * 4;
  } else {
    for (size_t bytes = 4; bytes <= max_bytes && nsizes < 64; bytes *= 4)
      if (bytes >= min_bytes) sizes[nsizes++] = bytes;
  }
  /* The same warm-up as bench_allreduce.cpp's: 2000 4-byte calls. */
  float one = 1.0f;
  for (int i = 0; i < 2000; ++i) MPI_Allreduce(MPI_IN_PLACE, &one, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  for (size_t k = 0; k < nsizes; ++k) {
    const size_t bytes = sizes[k];
    const size_t n = bytes / 4;
    float* buf = malloc(bytes);
    float* gathered = gather ? malloc(bytes * (size_t)world) : NULL;
    const int iters = iterations_for(bytes);
    double* us = malloc(sizeof(double) * (size_t)rounds * (size_t)iters);
    if (!buf || !us) {
      fprintf(stderr, "bench_mpi_allreduce: out of memory at %zu bytes\n", bytes);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; ++i) buf[i] = 1.0f;
    size_t kept = 0;
    for (int r = 0; r < rounds; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      for (int i = 0; i < iters + 3; ++i) {
        double t0 = MPI_Wtime();
        if (bcast) MPI_Bcast(buf, (int)n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        else if (gather) MPI_Allgather(buf, (int)n, MPI_FLOAT, gathered, (int)n, MPI_FLOAT, MPI_COMM_WORLD);
        else MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double el = (MPI_Wtime() - t0) * 1e6;
        if (i >= 3) us[kept++] = el;
      }
    }
    if (rank == 0) {
      qsort(us, kept, sizeof(double), by_value);
      double sum = 0;
      for (size_t i = 0; i < kept; ++i) sum += us[i];
      printf("{\"impl\": \"%s\", \"bytes\": %zu, \"p10_us\": %.3f, \"p50_us\": %.3f, \"p90_us\": %.3f, "
             "\"mean_us\": %.3f, \"n\": %zu}\n",
             label, bytes, pct(us, kept, 0.1), pct(us, kept, 0.5), pct(us, kept, 0.9), kept ? sum / (double)kept : 0.0,
             kept);
      fflush(stdout);
    }
    free(us);
    free(gathered);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
