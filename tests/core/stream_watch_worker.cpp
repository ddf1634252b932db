// One rank of the StreamWatch tests (core API, real Gloo): collectives left
// to the watchdog instead of a host wait, and what it reports when a peer
// stalls or dies. Prints "status=<name> after=<s>" lines the test reads.
#include <signal.h>
#include <unistd.h>

#include <ATen/ops/full.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "comm/collectives.h"
#include "comm/group.h"
#include "comm/stream_watch.h"
#include "env/cluster_env.h"

using namespace ddp::core;

namespace {
const char* name(Status s) {
  switch (s) {
    case Status::Ok: return "Ok";
    case Status::Timeout: return "Timeout";
    case Status::PeerFailed: return "PeerFailed";
    case Status::State: return "State";
    default: return "Other";
  }
}
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Polls the watch until it reports a failure (or `limit_s` passes).
void report_failure(StreamWatch& w, Clock::time_point t0, double limit_s) {
  while (since(t0) < limit_s) {
    try {
      w.throw_if_failed();
    } catch (const Error& e) {
      std::printf("status=%s after=%.2f msg=%s\n", name(e.status()), since(t0), e.what());
      return;
    }
    std::this_thread::sleep_for(Millis(20));
  }
  std::printf("status=none after=%.2f\n", since(t0));
}
}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  GroupOptions o;
  o.backend = "gloo";  // shm runs small collectives on the caller's thread
  // The rendezvous gets 30 s: with 1.5 s, an ASan rank starting on a busy
  // host (CI runs two tests at a time) missed it. The watch's timeout, the
  // one under test, is set once every rank has joined.
  o.timeout = Millis(30000);
  auto group = Group::init(detect_cluster_env(process_env_lookup()), o);
  group->set_timeout(Millis(1500));
  int rank = group->rank(), world = group->size();
  StreamWatch watch(*group);
  std::vector<at::Tensor> ts;
  auto t0 = Clock::now();
  if (scenario == "completes") {
    for (int i = 0; i < 5; ++i) {
      ts.push_back(at::full({1000}, static_cast<double>(rank + i)));
      watch.order(all_reduce(*group, ts.back(), ReduceOp::Sum));
    }
    while (watch.in_flight() > 0 && since(t0) < 10) std::this_thread::sleep_for(Millis(5));
    bool right = true;
    for (int i = 0; i < 5; ++i) right &= ts[i][999].item<double>() == world * (world - 1) / 2.0 + world * i;
    std::printf("in_flight=%zu right=%d\n", watch.in_flight(), right ? 1 : 0);
    report_failure(watch, t0, 0.3);
  } else if (scenario == "stalled") {
    if (rank == 0) {
      // Gloo's own timeout for this all-reduce is 10 s, the watch's 1.5 s:
      // what ends it is the watchdog's deadline.
      group->set_timeout(Millis(10000));
      ts.push_back(at::full({1000}, 1.0));
      auto p = all_reduce(*group, ts.back(), ReduceOp::Sum);
      group->set_timeout(Millis(1500));
      watch.order(std::move(p));
      report_failure(watch, t0, 8);
      std::fflush(stdout);
      std::this_thread::sleep_for(Millis(4000));  // host the store until rank 1 has looked
    } else {
      std::this_thread::sleep_for(Millis(3500));  // past rank 0's timeout
      try {
        barrier(*group)->wait();
        std::printf("status=Ok\n");
      } catch (const Error& e) {
        std::printf("status=%s msg=%s\n", name(e.status()), e.what());
      }
    }
  } else if (scenario == "killed") {
    if (rank == 1) raise(SIGKILL);
    ts.push_back(at::full({1 << 20}, 1.0));
    watch.order(all_reduce(*group, ts.back(), ReduceOp::Sum));
    report_failure(watch, t0, 8);
  }
  std::fflush(stdout);
  std::_Exit(0);  // a broken group's backend is not torn down cleanly
}
