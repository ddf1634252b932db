// Lightning's SLURM auto-requeue (its SignalConnector): SLURM sends a signal
// (SIGUSR1 by default, `#SBATCH --signal=SIGUSR1@90`) some time before a
// job's time limit; the program saves a checkpoint and asks SLURM to put the
// job back in the queue (`scontrol requeue <job id>`), and the requeued job
// resumes from that checkpoint. The handler only records that the signal
// came (nothing else is async-signal-safe); the training loop asks between
// steps.
#pragma once

#include <chrono>
#include <string>

namespace ddp::core {

using Millis = std::chrono::milliseconds;

class RequeueSignal {
 public:
  // Installs the handler for `signum` (the previous one is restored by the
  // destructor). Status::InvalidArgument for a signal that cannot be caught.
  explicit RequeueSignal(int signum);
  ~RequeueSignal();
  RequeueSignal(const RequeueSignal&) = delete;
  RequeueSignal& operator=(const RequeueSignal&) = delete;
  // Whether the signal came since the handler was installed.
  bool received() const;
  int signum() const { return signum_; }

 private:
  int signum_;
  struct Previous;
  Previous* previous_;
};

// The job id Lightning requeues: SLURM_ARRAY_JOB_ID_SLURM_ARRAY_TASK_ID for
// an array task, else SLURM_JOB_ID. Status::InvalidArgument when neither is set.
std::string slurm_job_to_requeue();

// Runs `scontrol requeue <job>` (found on PATH), waiting at most `timeout`.
// Status::IO naming the command and why it failed (not found, its exit
// status, killed after the timeout).
void slurm_requeue(const std::string& job, Millis timeout);

}  // namespace ddp::core
