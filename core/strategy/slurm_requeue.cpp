#include "strategy/slurm_requeue.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "launch/waitable_children.h"

extern char** environ;

namespace ddp::core {
namespace {

// One flag per signal number, set by the handler (lock-free atomics are
// async-signal-safe).
std::atomic<bool> g_received[NSIG];

void on_signal(int signum) {
  if (signum > 0 && signum < NSIG) g_received[signum].store(true);
}

}  // namespace

struct RequeueSignal::Previous {
  struct sigaction action;
};

RequeueSignal::RequeueSignal(int signum) : signum_(signum), previous_(new Previous) {
  check_arg(signum > 0 && signum < NSIG && signum != SIGKILL && signum != SIGSTOP,
            "requeue signal " + std::to_string(signum) + " cannot be caught");
  g_received[signum].store(false);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a blocking call the signal interrupts goes on
  if (sigaction(signum, &sa, &previous_->action) != 0) {
    delete previous_;
    fail(Status::InvalidArgument, "requeue signal " + std::to_string(signum) + ": " + std::strerror(errno));
  }
}

RequeueSignal::~RequeueSignal() {
  sigaction(signum_, &previous_->action, nullptr);
  delete previous_;
}

bool RequeueSignal::received() const { return g_received[signum_].load(); }

std::string slurm_job_to_requeue() {
  const char* array = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task = std::getenv("SLURM_ARRAY_TASK_ID");
  if (array && *array) return std::string(array) + "_" + (task ? task : "");
  const char* job = std::getenv("SLURM_JOB_ID");
  check_arg(job && *job, "requeue: neither SLURM_ARRAY_JOB_ID nor SLURM_JOB_ID is set (not a SLURM job?)");
  return job;
}

void slurm_requeue(const std::string& job, Millis timeout) {
  const std::string what = "scontrol requeue " + job;
  std::string arg0 = "scontrol", arg1 = "requeue", arg2 = job;
  char* argv[] = {arg0.data(), arg1.data(), arg2.data(), nullptr};
  const launch::WaitableChildren waitable;
  pid_t pid = 0;
  int err = posix_spawnp(&pid, "scontrol", nullptr, nullptr, argv, environ);
  if (err != 0) fail(Status::IO, what + ": cannot run scontrol: " + std::strerror(err));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno == ECHILD)
      fail(Status::IO, what + ": its exit status was taken by another waiter (the program's SIGCHLD handler reaps "
                              "every child: let it wait for its own children by pid)");
    if (done < 0 && errno != EINTR) fail(Status::IO, what + ": waitpid: " + std::strerror(errno));
    if (std::chrono::steady_clock::now() >= deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      fail(Status::IO, what + ": no answer within " + std::to_string(timeout.count()) + " ms (killed)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  fail(Status::IO, what + (WIFEXITED(status) ? ": exit status " + std::to_string(WEXITSTATUS(status))
                                             : ": killed by signal " + std::to_string(WTERMSIG(status))));
}

}  // namespace ddp::core
