// What the flight recorder adds to every collective: one record, the
// waiting mark and the finish mark, timed in a loop over many iterations
// (run_flight_recorder_cost.sh sets this beside a 4-byte all-reduce).
#include <cstdio>
#include <cstdlib>

#include "debug/flight_recorder.h"

int main(int argc, char** argv) {
  int iterations = argc > 1 ? std::atoi(argv[1]) : 2000000;
  ddp::core::flight::configure(0, 1);
  if (!ddp::core::flight::enabled()) {
    std::fprintf(stderr, "the flight recorder is off (DDP_FLIGHT_RECORDER_ENTRIES=0)\n");
    return 1;
  }
  ddp::core::flight::cycle_cost_ns(iterations / 10);  // warm the ring's pages
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    double ns = ddp::core::flight::cycle_cost_ns(iterations);
    if (ns < best) best = ns;
  }
  std::printf("%.2f\n", best);
  return 0;
}
