/*
 * What the training-surface test jobs share: a status check that names the
 * job and the call and exits, and reading the exported data files. Each job
 * sets job_name first thing in main.
 */
#ifndef DDP_TESTS_SURFACE_JOB_UTIL_H
#define DDP_TESTS_SURFACE_JOB_UTIL_H

#include <stdio.h>
#include <stdlib.h>

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

#endif
