/*
 * The collectives demo: every rank contributes its rank number, and prints
 * what sync_ddp (SUM and MEAN), all_gather, the uneven gather, the byte
 * broadcast and reduce_boolean_decision gave it.
 *
 * Run one process per rank with the Lightning environment set, e.g.
 *   MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 WORLD_SIZE=4 RANK=r ./allreduce_demo
 * (scripts/demo.sh does this for 4 ranks).
 */
#include <stdio.h>
#include <string.h>

#include <ddp/ddp.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    ddp_status s_ = (call);                                                      \
    if (s_ != DDP_OK) {                                                          \
      fprintf(stderr, "%s failed: %s: %s\n", #call, ddp_status_string(s_),       \
              ddp_last_error_message());                                         \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(void) {
  ddp_env *env = NULL;
  ddp_group *g = NULL;
  CHECK(ddp_env_detect(&env));
  CHECK(ddp_group_init(&g, env, NULL));
  int rank = ddp_group_rank(g), world = ddp_group_size(g);

  /* sync_ddp: SUM and MEAN of [rank, rank + 1, rank + 2]. */
  float sum[3] = {(float)rank, (float)rank + 1, (float)rank + 2};
  float mean[3];
  memcpy(mean, sum, sizeof(sum));
  int64_t shape3[1] = {3};
  ddp_tensor *t_sum = NULL, *t_mean = NULL;
  CHECK(ddp_tensor_from_blob(&t_sum, sum, DDP_FLOAT32, shape3, 1));
  CHECK(ddp_tensor_from_blob(&t_mean, mean, DDP_FLOAT32, shape3, 1));
  CHECK(ddp_all_reduce(g, t_sum, DDP_SUM));
  CHECK(ddp_all_reduce(g, t_mean, DDP_MEAN));

  /* all_gather of a scalar: every rank's rank. */
  int64_t me = rank;
  ddp_tensor *t_me = NULL, *gathered = NULL;
  CHECK(ddp_tensor_from_blob(&t_me, &me, DDP_INT64, NULL, 0));
  CHECK(ddp_all_gather(g, t_me, &gathered));
  const int64_t *ranks = (const int64_t *)ddp_tensor_data(gathered);

  /* gather_all_tensors: rank r sends r + 1 values. */
  float uneven[64];
  int64_t n = rank + 1;
  for (int i = 0; i < n; ++i) uneven[i] = (float)(10 * rank + i);
  ddp_tensor *t_uneven = NULL, *parts[64] = {0};
  CHECK(ddp_tensor_from_blob(&t_uneven, uneven, DDP_FLOAT32, &n, 1));
  CHECK(ddp_all_gather_uneven(g, t_uneven, parts));

  /* broadcast(obj) as bytes, and reduce_boolean_decision. */
  const char *msg = "hello from rank 0";
  ddp_buffer *buf = NULL;
  CHECK(ddp_broadcast_bytes(g, msg, strlen(msg) + 1, 0, &buf));
  int all_even = 0, any_even = 0;
  CHECK(ddp_reduce_boolean_decision(g, rank % 2 == 0, 1, &all_even));
  CHECK(ddp_reduce_boolean_decision(g, rank % 2 == 0, 0, &any_even));

  /* One line per rank, printed in rank order. */
  for (int r = 0; r < world; ++r) {
    CHECK(ddp_barrier(g));
    if (r != rank) continue;
    printf("[rank %d/%d] sum=[%g %g %g] mean=[%g %g %g] all_gather=[", rank, world, sum[0], sum[1],
           sum[2], mean[0], mean[1], mean[2]);
    for (int i = 0; i < world; ++i) printf("%s%lld", i ? " " : "", (long long)ranks[i]);
    printf("] uneven sizes=[");
    for (int i = 0; i < world; ++i)
      printf("%s%lld", i ? " " : "", (long long)ddp_tensor_numel(parts[i]));
    printf("] bytes=\"%s\" all_even=%d any_even=%d\n", (const char *)ddp_buffer_data(buf), all_even,
           any_even);
    fflush(stdout);
  }
  CHECK(ddp_barrier(g));

  for (int i = 0; i < world; ++i) ddp_tensor_free(parts[i]);
  ddp_tensor_free(t_uneven);
  ddp_tensor_free(gathered);
  ddp_tensor_free(t_me);
  ddp_tensor_free(t_sum);
  ddp_tensor_free(t_mean);
  ddp_buffer_free(buf);
  ddp_group_free(g);
  ddp_env_free(env);
  return 0;
}
