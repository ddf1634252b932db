// Test harness: runs N real processes of a worker program (one per rank) on
// loopback, with a wall-clock limit, and never leaves one behind.
#pragma once

#include <string>
#include <vector>

namespace ddptest {

struct RankResult {
  int exit_code = -1;  // when exited normally
  int signal = 0;      // when killed by a signal
  std::string output;  // stdout + stderr
};

struct RunResult {
  std::vector<RankResult> ranks;
  double seconds = 0;
  bool timed_out = false;
  std::string summary() const;
};

// A free TCP port on 127.0.0.1 (bound with port 0, then released).
int free_port();

// Binds and listens on a free port (every interface, IPv4 and IPv6), to
// make "port in use" happen; returns the fd (close it) and sets *port.
int occupy_port(int* port);

// Spawns `world` copies of `argv` with MASTER_ADDR/MASTER_PORT/WORLD_SIZE/
// RANK/LOCAL_RANK/OMP_NUM_THREADS set, plus `env` ("K=V"). Ranks in `skip`
// are not started. After `limit_s` every survivor is SIGKILLed.
RunResult run_ranks(int world, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env = {}, double limit_s = 120,
                    const std::vector<int>& skip = {});

// Runs one program (argv[0] is its path) with extra env, capturing its
// output; result.ranks has one entry.
RunResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      double limit_s);

// The worker executable next to the test binary.
std::string worker_path();

// True if any process whose environment holds DDP_TEST_TAG=tag is alive.
bool any_process_tagged(const std::string& tag);

}  // namespace ddptest
