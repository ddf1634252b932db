// ddp_spawn: run a function in N local processes and return rank 0's result
// (Lightning's DDPSpawnStrategy / DDPStrategy start methods).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch/supervisor.h"

namespace ddp::core::launch {

enum class StartMethod { Popen, Fork };

// The longest job timeout (3e12 ms, about 95 years); the SIGTERM grace is
// at most kMaxTimeout, a group's longest. The supervisor's deadlines are
// counted in nanoseconds, which overflow past about 292 years: a timeout
// of INT64_MAX ms stopped the job at once.
constexpr Millis kMaxJobTimeout{3000000000000};

struct SpawnOptions {
  int nprocs = 1;
  StartMethod method = StartMethod::Popen;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // 0: a free port, bound once and handed to rank 0
  Millis timeout{0};    // whole job; 0: none
  Millis grace{5000};
};

struct WorkerContext {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  bool has_result = false;
  std::vector<uint8_t> result;
};

using WorkerBody = std::function<int(WorkerContext& ctx, const std::vector<uint8_t>& arg)>;

struct SpawnOutcome {
  bool ran_here = true;   // false: this process is a popen worker of a later call
  std::optional<std::vector<uint8_t>> rank0_result;
};

// In the launching process: starts the workers, supervises them, returns
// rank 0's result (or throws ddp::core::Error with Status::WorkerFailed and the
// job's summary). In a popen worker of this very call: runs `body` and exits
// the process with its return code (never returns).
SpawnOutcome spawn(const SpawnOptions& opts, const WorkerBody& body, const void* arg, size_t arg_len);

}  // namespace ddp::core::launch
