// How ddprun reports a failed job: torchrun's summary on stderr (root cause
// first) and its JSON error file (--error-file / TORCHELASTIC_ERROR_FILE).
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "launch/supervisor.h"

namespace ddprun {

struct Failure {
  int rank, local_rank, node;
  ddp::core::launch::ChildStatus status;
  std::string time;  // ISO 8601, UTC
};

// The failures of one round, root cause first; workers stopped by ddprun
// after another failure are not failures of their own.
std::vector<Failure> failures_of(const ddp::core::launch::JobResult& job, const DdprunArgs& a);

void print_failure_summary(const std::vector<Failure>& failures, const std::string& prog, int restarts);

// Written atomically (a temporary file, then rename); nothing when `path` is empty.
void write_error_file(const std::string& path, const std::vector<Failure>& failures, int restarts,
                      const std::string& message);

}  // namespace ddprun
