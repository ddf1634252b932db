/*
 * Prints CLOCK_MONOTONIC in nanoseconds. The benchmarks' shell scripts time
 * with it: `date` reads the wall clock, which may jump (a step of about
 * 4.5 s once landed inside a timed launch test on a CI host), and
 * /proc/uptime counts in 10 ms steps. No library: it starts in about a
 * millisecond. CLOCK_MONOTONIC is the whole machine's, so bench_launch's
 * ranks read the same clock.
 */
#include <stdio.h>
#include <time.h>

int main(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 1;
  printf("%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  return 0;
}
