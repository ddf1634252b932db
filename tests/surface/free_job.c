/*
 * ddp_strategy_free tears down as ddp_strategy_teardown does: on 2 ranks
 * the strategy starts itself (the popen launcher), rank 1 is still busy for
 * a second after the last collective and then leaves a file in DIR; rank 0
 * frees its strategy without a teardown and must find the file when the
 * free returns, i.e. rank 1 ended on its own instead of being stopped.
 *
 *   free_job DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ddp/ddp.h>

#include "job_util.h"

int main(int argc, char **argv) {
  job_name = "free_job";
  if (argc != 2) {
    fprintf(stderr, "usage: free_job DIR\n");
    return 2;
  }
  char marker[4096];
  snprintf(marker, sizeof marker, "%s/rank1.done", argv[1]);
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  so.timeout_ms = 30000;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s);
  if (rank == 0) remove(marker);
  check(ddp_strategy_barrier(s, "marker removed"), "barrier");
  if (rank == 1) {
    struct timespec busy = {1, 0};
    nanosleep(&busy, NULL);
    FILE *f = fopen(marker, "w");
    if (!f || fputs("done\n", f) < 0 || fclose(f) != 0) {
      fprintf(stderr, "free_job: rank 1 cannot write %s\n", marker);
      return 2;
    }
  }
  ddp_strategy_free(s);
  if (rank == 0) {
    FILE *f = fopen(marker, "r");
    if (!f) {
      fprintf(stderr, "free_job: %s is missing: ddp_strategy_free stopped rank 1 before it ended\n", marker);
      return 1;
    }
    fclose(f);
    printf("rank 0: rank 1 ended on its own before ddp_strategy_free returned\n");
  }
  return 0;
}
