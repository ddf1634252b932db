/*
 * What the training-surface test jobs share: a status check that names the
 * job and the call and exits, and reading the exported data files. Each job
 * sets job_name first thing in main.
 */
#ifndef DDP_TESTS_SURFACE_JOB_UTIL_H
#define DDP_TESTS_SURFACE_JOB_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddp/ddp.h>

static const char *job_name = "job";

static void check(ddp_status st, const char *what) {
  if (st != DDP_OK) {
    fprintf(stderr, "%s: %s: %s (status %d)\n", job_name, what, ddp_last_error_message(), (int)st);
    exit(2);
  }
}

/* DIR/NAME's first `bytes` bytes into `dst`; exits naming the file otherwise. */
static void read_file(const char *dir, const char *name, void *dst, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f || fread(dst, 1, bytes, f) != bytes) {
    fprintf(stderr, "%s: cannot read %s\n", job_name, path);
    exit(2);
  }
  fclose(f);
}

/* The data export_surface.py writes: N rows of FEATURES features, and the
 * GAN's LATENT noise values per row; the GAN and Join jobs map the noise to
 * the first REAL features, PER_RANK rows per rank and step. */
#define N 96
#define FEATURES 8
#define LATENT 4
#define REAL 6
#define PER_RANK 8

/* Step `step`'s rows of rank `rank` for the GAN and Join jobs: the real
 * features into `real` (PER_RANK x REAL) and the noise into `z` (PER_RANK x LATENT). */
static inline void noise_rows(const float *xs, const float *zs, int step, int rank, float *real, float *z) {
  for (int i = 0; i < PER_RANK; ++i) {
    int row = (step * 2 * PER_RANK + rank * PER_RANK + i) % N;
    memcpy(real + i * REAL, xs + row * FEATURES, sizeof(float) * REAL);
    memcpy(z + i * LATENT, zs + row * LATENT, sizeof(float) * LATENT);
  }
}

#endif
