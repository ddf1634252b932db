/*
 * SLURM's auto-requeue from C (Lightning's SignalConnector), on the ranks a
 * test starts with SLURM's environment: after step REQUEUE_RAISE_AT, the
 * rank REQUEUE_RAISE_RANK sends itself SIGUSR1 (what SLURM sends before the
 * time limit); every rank learns it at the same step through
 * ddp_strategy_requeue_requested, saves DIR/hpc.ckpt, and rank 0 runs
 * `scontrol requeue`. Prints "rank R requeue at step S" and the requeue's
 * status, then exits 0.
 *
 *   requeue_job DIR
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include <ddp/ddp.h>

#include "job_util.h"

int main(int argc, char **argv) {
  job_name = "requeue_job";
  if (argc < 2) return 2;
  const int raise_at = atoi(getenv("REQUEUE_RAISE_AT") ? getenv("REQUEUE_RAISE_AT") : "3");
  const int raise_rank = atoi(getenv("REQUEUE_RAISE_RANK") ? getenv("REQUEUE_RAISE_RANK") : "1");
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.timeout_ms = 30000;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s);
  char path[4096];
  snprintf(path, sizeof path, "%s/two_heads.pt", argv[1]);
  ddp_module *m = NULL;
  check(ddp_module_load(&m, path), "module");
  check(ddp_strategy_setup_module(s, m), "setup_module");
  for (int step = 0; step < 100; ++step) {
    check(ddp_strategy_barrier(s, "a step"), "step");
    if (step == raise_at && rank == raise_rank) raise(SIGUSR1);
    int requeue = 0;
    check(ddp_strategy_requeue_requested(s, &requeue), "requeue_requested");
    if (requeue) {
      printf("rank %d requeue at step %d\n", rank, step);
      snprintf(path, sizeof path, "%s/hpc.ckpt", argv[1]);
      ddp_checkpoint_info info = DDP_CHECKPOINT_INFO_INIT;
      info.step = step;
      check(ddp_strategy_save_checkpoint_v2(s, path, m, NULL, 0, NULL, 0, &info), "save");
      ddp_status st = ddp_strategy_requeue(s);
      printf("rank %d requeue status %d %s\n", rank, (int)st, st == DDP_OK ? "" : ddp_last_error_message());
      break;
    }
  }
  fflush(stdout);
  ddp_module_free(m);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  return 0;
}
