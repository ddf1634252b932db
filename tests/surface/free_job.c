/*
 * ddp_strategy_free tears down as ddp_strategy_teardown does: on 2 ranks
 * the strategy starts itself (the popen launcher), rank 1 is still busy for
 * a second after the last collective and then leaves a file in DIR; rank 0
 * frees its strategy without a teardown and must find the file when the
 * free returns, i.e. rank 1 ended on its own instead of being stopped.
 *
 *   free_job DIR
 *
 * With --rank1-setup-fails, rank 1's backend cannot start (GLOO_SOCKET_IFNAME
 * names no interface there): rank 0's setup must fail naming rank 1's
 * reason, and rank 0's free must let rank 1 end with its own exit code 3,
 * which the launcher names as the first failure (not "stopped").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ddp/ddp.h>

#include "job_util.h"

/* --rank1-setup-fails: rank 1's setup fails; see the comment at the top. */
static int setup_fails_on_rank1(const char *dir) {
  const char *env_rank = getenv("RANK");
  const int launched = env_rank && !strcmp(env_rank, "1");
  if (launched) setenv("GLOO_SOCKET_IFNAME", "nosuchif0", 1);
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  so.timeout_ms = 30000;
  so.backend = "gloo";
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  ddp_status st = ddp_strategy_setup_environment(s);
  const char *msg = ddp_last_error_message();
  printf("%s: setup -> %s: %s\n", launched ? "rank 1" : "rank 0", ddp_status_string(st), msg);
  fflush(stdout);
  if (launched) {
    /* A program takes a moment to end after a failure (logs, CUDA teardown). */
    struct timespec ending = {0, 500 * 1000 * 1000};
    nanosleep(&ending, NULL);
    return 3; /* the strategy is left to the process's end */
  }
  int named = st != DDP_OK && strstr(msg, "rank 1") && strstr(msg, "nosuchif0");
  /* What the free says about the launched rank goes to stderr: kept in a file. */
  char said_path[4096], said[4096] = {0};
  snprintf(said_path, sizeof said_path, "%s/free_said.txt", dir);
  fflush(stderr);
  if (!freopen(said_path, "w", stderr)) return 2;
  ddp_strategy_free(s);
  fflush(stderr);
  FILE *f = fopen(said_path, "r");
  size_t got = f ? fread(said, 1, sizeof said - 1, f) : 0;
  if (f) fclose(f);
  remove(said_path);
  said[got] = '\0';
  printf("rank 0: ddp_strategy_free said: %s\n", said);
  int own_status = strstr(said, "exit code 3 [first failure]") && !strstr(said, "stopped by the launcher");
  if (!named) printf("rank 0's setup does not name rank 1's reason\n");
  if (!own_status) printf("rank 1 did not end with its own exit code 3 before the free returned\n");
  return named && own_status ? 0 : 1;
}

int main(int argc, char **argv) {
  job_name = "free_job";
  if (argc != 2 && !(argc == 3 && !strcmp(argv[2], "--rank1-setup-fails"))) {
    fprintf(stderr, "usage: free_job DIR [--rank1-setup-fails]\n");
    return 2;
  }
  if (argc == 3) return setup_fails_on_rank1(argv[1]);
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
