/*
 * A C program that launches its own workers with ddp_spawn. Its mode (argv[1])
 * picks a scenario; tests/launch/test_launch.cpp runs it and checks the outcome.
 *   ok [popen|fork] N    : N workers all_reduce their ranks; rank 0 returns the sum
 *   twice N              : two ddp_spawn calls in one program
 *   fail_rank0 N         : rank 0 returns 7, the others wait in a barrier
 *   kill_rank1 N         : rank 1 SIGKILLs itself
 *   fork_threads         : DDP_START_FORK after starting a thread: refused
 *   timeout N            : the workers sleep past the job timeout
 *   port PORT N          : use an explicit master_port (maybe in use)
 *   long_timeouts        : timeouts past the longest are refused; the longest works
 *   sigchld_reaper       : the program's SIGCHLD handler reaps every child (waitpid(-1))
 *   own_child METHOD     : under an ignored SIGCHLD, a child of the program's own ends
 *                          while the call waits; says whether it is a zombie after
 *   nested_program       : rank 0's worker runs this program again ("ok popen 2") with
 *                          system(); its result carries what that program printed
 *   nested_call OUTER INNER : rank 0's worker calls ddp_spawn itself (methods popen|fork)
 *   unset_rank           : the workers unset RANK before their ddp_spawn call
 *   main_ends_early      : in its popen workers main returns before the ddp_spawn call,
 *                          as an interpreter's prompt or a script read from stdin does
 *   read_stdin           : each worker reads its standard input to the end and says how much
 *   strategy_child_ends_early [CODE] : the strategy's popen launcher starts rank 1, whose main
 *                          returns CODE (default 0) before its setup
 *   chdir_first DIR spawn|strategy : main enters DIR (relative) first, then starts 2 ranks
 *                          (ddp_spawn, or the strategy's popen launcher); each says its directory
 * Where SIGCHLD is ignored on entry, "ok" also says whether it still is after the call.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ddp/ddp.h>

static int sum_ranks(ddp_worker *w, const void *arg, size_t len) {
  ddp_group *g = NULL;
  if (ddp_group_init(&g, NULL, NULL) != DDP_OK) {
    fprintf(stderr, "[rank %d] group_init: %s\n", ddp_worker_rank(w), ddp_last_error_message());
    return 3;
  }
  int64_t v = ddp_worker_rank(w);
  ddp_tensor *t = NULL;
  ddp_tensor_from_blob(&t, &v, DDP_INT64, NULL, 0);
  if (ddp_all_reduce(g, t, DDP_SUM) != DDP_OK) return 4;
  char msg[128];
  snprintf(msg, sizeof msg, "%.*s sum=%lld world=%d", (int)len, (const char *)arg, (long long)v,
           ddp_worker_world_size(w));
  if (ddp_worker_rank(w) == 0) ddp_worker_set_result(w, msg, strlen(msg));
  ddp_tensor_free(t);
  ddp_group_free(g);
  return 0;
}

static int fail_rank0(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  if (ddp_worker_rank(w) == 0) return 7;
  ddp_group *g = NULL;
  ddp_group_options o = DDP_GROUP_OPTIONS_INIT;
  o.timeout_ms = 600000;
  if (ddp_group_init(&g, NULL, &o) != DDP_OK) return 3; /* rank 0 never comes */
  ddp_barrier(g);
  return 0;
}

static int kill_rank1(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  if (ddp_worker_rank(w) == 1) raise(SIGKILL);
  sleep(600);
  return 0;
}

static int sleeper(ddp_worker *w, const void *arg, size_t len) {
  (void)w; (void)arg; (void)len;
  sleep(600);
  return 0;
}

static void *idle_thread(void *p) { (void)p; sleep(600); return NULL; }

static ddp_status st;

static void reap_every_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

static int sigchld_ignored(void) {
  struct sigaction now;
  return sigaction(SIGCHLD, NULL, &now) == 0 && now.sa_handler == SIG_IGN;
}

/* Whether SIGCHLD is blocked-by-ignoring in process `pid`, from the
 * SigIgn mask of /proc/PID/status (1 yes, 0 no, -1 unreadable). */
static int sigchld_ignored_in(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int ignored = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long long mask;
    if (sscanf(line, "SigIgn: %llx", &mask) == 1) ignored = (mask >> (SIGCHLD - 1)) & 1;
  }
  fclose(f);
  return ignored;
}

/* A child of the program's own that ends while ddp_spawn holds SIGCHLD at
 * its default action (it watches its parent's mask), so that it ends where
 * the kernel does not reap it; it gives up after 20 s, saying so. */
static pid_t start_own_child(void) {
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid != 0) return pid;
  for (int i = 0; i < 20000; ++i) {
    if (sigchld_ignored_in(parent) == 0) {
      printf("own child: ended while sigchld had its default action\n");
      fflush(stdout);
      _exit(0);
    }
    usleep(1000);
  }
  printf("own child: gave up waiting\n");
  fflush(stdout);
  _exit(0);
}

static char self_path[4096];

/* What a command printed, lines joined by '|', into out. */
static void run_and_read(const char *cmd, char *out, size_t cap) {
  FILE *p = popen(cmd, "r");
  size_t used = 0;
  out[0] = 0;
  if (!p) return;
  char line[512];
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '|';
    used += (size_t)snprintf(out + used, used < cap ? cap - used : 0, "%s", line);
  }
  pclose(p);
}

/* Rank 0 runs this program again, as a helper it starts would be: the
 * helper inherits the worker's environment. */
static int nested_program(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  if (ddp_worker_rank(w) != 0) return 0;
  char cmd[4200], said[2048], msg[2200];
  snprintf(cmd, sizeof cmd, "%s ok popen 2 2>&1", self_path);
  run_and_read(cmd, said, sizeof said);
  snprintf(msg, sizeof msg, "nested program said [%s]", said);
  ddp_worker_set_result(w, msg, strlen(msg));
  return 0;
}

static ddp_start_method inner_method;

/* Rank 0 calls ddp_spawn from inside its worker body. */
static int nested_call(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  if (ddp_worker_rank(w) != 0) return 0;
  ddp_spawn_options inner = DDP_SPAWN_OPTIONS_INIT;
  inner.nprocs = 2;
  inner.start_method = inner_method;
  ddp_buffer *got = NULL;
  const ddp_status s = ddp_spawn(&inner, sum_ranks, "inner", 5, &got);
  char msg[1024];
  snprintf(msg, sizeof msg, "inner status=%s [%s] result=[%.*s]", ddp_status_string(s),
           s == DDP_OK ? "" : ddp_last_error_message(), got ? (int)ddp_buffer_size(got) : 0,
           got ? (const char *)ddp_buffer_data(got) : "");
  ddp_buffer_free(got);
  ddp_worker_set_result(w, msg, strlen(msg));
  return 0;
}

static int read_stdin(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  char buf[256];
  size_t total = 0, n;
  while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) total += n;
  printf("rank %d read %zu bytes of stdin\n", ddp_worker_rank(w), total);
  fflush(stdout);
  return 0;
}

static int say_cwd(ddp_worker *w, const void *arg, size_t len) {
  (void)arg; (void)len;
  char cwd[4096];
  printf("rank %d cwd=%s\n", ddp_worker_rank(w), getcwd(cwd, sizeof cwd) ? cwd : "?");
  fflush(stdout);
  return 0;
}

/* The strategy's popen launcher: this process is rank 0 and starts rank 1. */
static int strategy_says_cwd(void) {
  ddp_strategy_options so = DDP_STRATEGY_OPTIONS_INIT;
  so.devices = 2;
  ddp_strategy *s = NULL;
  ddp_status st_ = ddp_strategy_new(&s, &so);
  if (st_ == DDP_OK) st_ = ddp_strategy_setup_environment(s);
  if (st_ != DDP_OK) {
    printf("strategy: %s: %s\n", ddp_status_string(st_), ddp_last_error_message());
    ddp_strategy_free(s);
    return 1;
  }
  char cwd[4096];
  printf("rank %d cwd=%s\n", ddp_strategy_global_rank(s), getcwd(cwd, sizeof cwd) ? cwd : "?");
  fflush(stdout);
  const ddp_status torn = ddp_strategy_teardown(s);
  ddp_strategy_free(s);
  return torn == DDP_OK ? 0 : 1;
}

static int report(ddp_status s, ddp_buffer *result) {
  printf("status=%s\n", ddp_status_string(s));
  if (s != DDP_OK) printf("message=%s\n", ddp_last_error_message());
  if (result) printf("result=%.*s\n", (int)ddp_buffer_size(result), (const char *)ddp_buffer_data(result));
  ddp_buffer_free(result);
  fflush(stdout);
  return s == DDP_OK ? 0 : 1;
}

/* The comma operator runs the spawn before `result` is read. */
#define RUN(call) (st = (call), report(st, result))

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "ok";
  ddp_spawn_options o = DDP_SPAWN_OPTIONS_INIT;
  o.nprocs = 2;
  o.grace_ms = 2000;
  ddp_buffer *result = NULL;
  const char *greeting = "hello";
  if (!strcmp(mode, "ok")) {
    if (argc > 2 && !strcmp(argv[2], "fork")) o.start_method = DDP_START_FORK;
    if (argc > 3) o.nprocs = atoi(argv[3]);
    const int ignored = sigchld_ignored();
    const int rc = RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
    if (ignored) printf("sigchld after the call: %s\n", sigchld_ignored() ? "ignored" : "not ignored");
    return rc;
  }
  if (!strcmp(mode, "own_child")) {
    if (argc > 2 && !strcmp(argv[2], "fork")) o.start_method = DDP_START_FORK;
    /* Popen workers run main again; SIGCHLD has its default action there. */
    const pid_t own = sigchld_ignored() ? start_own_child() : -1;
    const int rc = RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
    if (own > 0) {
      int status = 0;
      const pid_t got = waitpid(own, &status, WNOHANG);
      printf("own child after the call: %s\n", got == own ? "a zombie" : got == 0 ? "still running" : "reaped");
    }
    return rc;
  }
  if (!strcmp(mode, "sigchld_reaper")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = reap_every_child;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    return RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
  }
  if (!strcmp(mode, "twice")) {
    if (argc > 2) o.nprocs = atoi(argv[2]);
    int rc = RUN(ddp_spawn(&o, sum_ranks, "first", 5, &result));
    result = NULL;
    return rc | RUN(ddp_spawn(&o, sum_ranks, "second", 6, &result));
  }
  if (!strcmp(mode, "fail_rank0")) {
    if (argc > 2) o.nprocs = atoi(argv[2]);
    return RUN(ddp_spawn(&o, fail_rank0, NULL, 0, &result));
  }
  if (!strcmp(mode, "kill_rank1")) {
    if (argc > 2) o.nprocs = atoi(argv[2]);
    return RUN(ddp_spawn(&o, kill_rank1, NULL, 0, &result));
  }
  if (!strcmp(mode, "fork_threads")) {
    pthread_t th;
    pthread_create(&th, NULL, idle_thread, NULL);
    o.start_method = DDP_START_FORK;
    return RUN(ddp_spawn(&o, sum_ranks, NULL, 0, &result));
  }
  if (!strcmp(mode, "timeout")) {
    o.timeout_ms = 1500;
    return RUN(ddp_spawn(&o, sleeper, NULL, 0, &result));
  }
  if (!strcmp(mode, "long_timeouts")) {
    /* INT64_MAX ms overflowed the supervisor's deadline: the job was stopped at once. */
    o.timeout_ms = INT64_MAX;
    int rc = RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
    o.timeout_ms = 0;
    o.grace_ms = INT64_MAX;
    rc &= RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
    o.timeout_ms = 3000000000000LL; /* the longest: about 95 years */
    o.grace_ms = 2147483647;
    return rc | RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result)) << 1;
  }
  if (!strcmp(mode, "nested_program")) {
    const ssize_t n = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    self_path[n > 0 ? n : 0] = 0;
    return RUN(ddp_spawn(&o, nested_program, NULL, 0, &result));
  }
  if (!strcmp(mode, "nested_call") && argc > 3) {
    if (!strcmp(argv[2], "fork")) o.start_method = DDP_START_FORK;
    inner_method = !strcmp(argv[3], "fork") ? DDP_START_FORK : DDP_START_POPEN;
    return RUN(ddp_spawn(&o, nested_call, NULL, 0, &result));
  }
  if (!strcmp(mode, "unset_rank")) {
    if (getenv("DDP_SPAWN_CALL")) unsetenv("RANK");
    return RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
  }
  if (!strcmp(mode, "main_ends_early")) {
    if (getenv("DDP_SPAWN_CALL")) return 0;
    return RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
  }
  if (!strcmp(mode, "read_stdin")) {
    if (argc > 2 && !strcmp(argv[2], "fork")) o.start_method = DDP_START_FORK;
    return RUN(ddp_spawn(&o, read_stdin, NULL, 0, &result));
  }
  if (!strcmp(mode, "strategy_child_ends_early")) {
    if (getenv("LOCAL_RANK") && strcmp(getenv("LOCAL_RANK"), "0") != 0) return argc > 2 ? atoi(argv[2]) : 0;
    return strategy_says_cwd();
  }
  if (!strcmp(mode, "chdir_first") && argc > 3) {
    /* Relative: a worker started in DIR instead of where main began could not enter it. */
    if (chdir(argv[2]) != 0) {
      printf("cannot enter %s\n", argv[2]);
      return 5;
    }
    if (!strcmp(argv[3], "strategy")) return strategy_says_cwd();
    return RUN(ddp_spawn(&o, say_cwd, NULL, 0, &result));
  }
  if (!strcmp(mode, "port")) {
    o.master_port = atoi(argv[2]);
    return RUN(ddp_spawn(&o, sum_ranks, greeting, strlen(greeting), &result));
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 2;
}
