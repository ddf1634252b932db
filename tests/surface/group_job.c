/*
 * The strategy's reduce and all_gather with a group argument (issue 24), on
 * 4 ranks the strategy starts itself: subgroups of 2 made from the
 * strategy's group reduce and gather within themselves; a group of another
 * job (this rank's own one-rank group, made by ddp_group_init) is refused
 * by name before any communication, on every rank. Exits 0 when every
 * check holds; each failure is printed.
 *
 *   group_job
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ddp/ddp.h>

#include "job_util.h"

static int failures = 0;

static void expect(int ok, int rank, const char *what) {
  if (!ok) {
    fprintf(stderr, "group_job: rank %d: %s\n", rank, what);
    ++failures;
  }
}

int main(void) {
  job_name = "group_job";
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 4;
  so.timeout_ms = 30000;
  ddp_strategy *s = NULL;
  check(ddp_strategy_new(&s, &so), "strategy_new");
  check(ddp_strategy_setup_environment(s), "setup_environment");
  const int rank = ddp_strategy_global_rank(s);
  ddp_group *pairs = NULL;
  check(ddp_group_new_subgroups(ddp_strategy_group(s), 2, &pairs), "subgroups");

  /* reduce(SUM) within {0, 1} and {2, 3}: 1 + 2 and 3 + 4. */
  float v = (float)(rank + 1);
  ddp_tensor *t = NULL;
  check(ddp_tensor_from_blob(&t, &v, DDP_FLOAT32, NULL, 0), "tensor");
  check(ddp_strategy_reduce_v2(s, t, DDP_SUM, pairs), "reduce in a subgroup");
  expect(v == (rank < 2 ? 3.0f : 7.0f), rank, "the subgroup's sum");
  /* all_gather within the pair: [pair's first rank, its second]. */
  float mine[2] = {(float)rank, (float)(10 * rank)};
  int64_t shape[1] = {2};
  ddp_tensor *in = NULL, *out = NULL;
  check(ddp_tensor_from_blob(&in, mine, DDP_FLOAT32, shape, 1), "tensor");
  check(ddp_strategy_all_gather_v3(s, in, 0, pairs, &out), "all_gather in a subgroup");
  float got[4] = {0};
  expect(ddp_tensor_shape(out)[0] == 2, rank, "the gathered size is the subgroup's");
  check(ddp_tensor_copy_to(out, got, sizeof got), "copy");
  const int first = rank - rank % 2;
  expect(got[0] == (float)first && got[2] == (float)(first + 1) && got[3] == (float)(10 * (first + 1)), rank,
         "the pair's rows in rank order");
  ddp_tensor_free(out);
  /* NULL: the strategy's own group, all 4. */
  v = 1;
  check(ddp_strategy_reduce_v2(s, t, DDP_SUM, NULL), "reduce over the strategy's group");
  expect(v == 4.0f, rank, "the whole group's sum");

  /* A group of another job: this rank alone, joined through its own store. */
  ddp_env *env = NULL;
  check(ddp_env_new(&env, 0, 1, 0, 1, 0, "127.0.0.1", 0), "env");
  ddp_group_options go = DDP_GROUP_OPTIONS_INIT;
  go.backend = "gloo";
  ddp_group *foreign = NULL;
  check(ddp_group_init(&foreign, env, &go), "foreign group");
  ddp_env_free(env);
  ddp_status st = ddp_strategy_reduce_v2(s, t, DDP_SUM, foreign);
  expect(st == DDP_E_INVALID_ARGUMENT && strstr(ddp_last_error_message(), "not of this strategy's job"), rank,
         "a foreign group refused by name (reduce)");
  st = ddp_strategy_all_gather_v3(s, in, 0, foreign, &out);
  expect(st == DDP_E_INVALID_ARGUMENT && out == NULL, rank, "a foreign group refused (all_gather)");
  /* The strategy's group still works after the refusals. */
  check(ddp_strategy_barrier(s, "after the refusals"), "barrier");

  ddp_group_free(foreign);
  ddp_group_free(pairs);
  ddp_tensor_free(t);
  ddp_tensor_free(in);
  printf("rank %d: %s\n", rank, failures ? "FAILED" : "ok");
  fflush(stdout);
  check(ddp_strategy_teardown(s), "teardown");
  ddp_strategy_free(s);
  return failures ? 1 : 0;
}
