// Starting worker processes and watching them until they end. Shared by
// ddp_spawn (popen and fork) and ddprun. The rules that make a launcher
// never hang and never leak a process:
//   - every child gets PR_SET_PDEATHSIG(SIGKILL): it dies with its parent;
//   - the first child to fail (non-zero exit or a signal) is the root cause;
//     the others get SIGTERM, then SIGKILL after a grace period;
//   - an optional job timeout, and an external stop request (a signal the
//     launcher caught), end the job the same way.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace ddp::core::launch {

using Millis = std::chrono::milliseconds;

struct ChildSpec {
  int rank = 0;                       // label for messages (global rank)
  std::vector<std::string> env;       // full environment, "K=V"
  std::vector<std::string> argv;      // exec this (argv[0] is the path unless `exe` is set) ...
  std::string exe;                    // the file to exec, keeping argv[0] as given
  std::string cwd;                    // where an exec'd child starts; empty: the parent's directory now
  // Non-empty: a file the child makes once it has reached the work it was
  // started for; ending with exit code 0 without it is a failure
  // (ChildStatus::never_reached), as the work was never done.
  std::string reached_file;
  bool stdin_from_null = false;       // the child reads /dev/null, not the parent's standard input
  std::function<int()> body;          // ... or run this in a forked child
  std::vector<int> keep_fds;          // fds the child inherits (others close-on-exec)
  bool capture_output = false;        // pipe stdout+stderr to on_line
  rlim_t descriptor_limit = 0;        // the child's soft RLIMIT_NOFILE; 0: the parent's
};

struct ChildStatus {
  int rank = 0;
  pid_t pid = -1;
  int exit_code = -1;  // valid when signal == 0 and ended
  int signal = 0;
  bool ended = false;
  bool stopped_by_us = false;  // we signalled it after another failure/stop
  bool status_lost = false;    // ended, reaped by another waiter: not ok, how unknown
  bool never_reached = false;  // exit code 0 without its ChildSpec::reached_file: not ok
  double seconds = 0;          // from job start to end
  bool ok() const { return ended && signal == 0 && exit_code == 0 && !never_reached; }
  std::string describe() const;  // "exit code 3", "signal 9 (SIGKILL)"
};

struct JobResult {
  std::vector<ChildStatus> children;  // in start order
  int first_failure = -1;             // index into children, -1: none
  bool timed_out = false;
  int stop_signal = 0;                // the external stop request, if any
  bool stopped_by_check = false;      // should_stop() asked for it
  bool ok() const { return first_failure < 0 && !timed_out && stop_signal == 0 && !stopped_by_check; }
  // "rank 1 (pid 42): exit code 3 [root cause]; rank 0 (pid 41): signal 15 (SIGTERM, stopped) ..."
  std::string summary() const;
};

struct SupervisorOptions {
  Millis grace{5000};        // SIGTERM -> SIGKILL
  Millis job_timeout{0};     // 0: none
  Millis poll{20};           // how often to look at children
  // Receives each complete output line of a capturing child.
  std::function<void(int rank, const std::string& line)> on_line;
  // Set (e.g. by a signal handler) to ask for an orderly stop; its value is
  // the signal forwarded to the children.
  const std::atomic<int>* stop_request = nullptr;
  // Polled every `check_interval` with how each child stands; returning
  // true stops the job (children get SIGTERM, then SIGKILL), e.g. when
  // another node's worker failed.
  std::function<bool(const std::vector<ChildStatus>& children)> should_stop;
  Millis check_interval{1000};
};

// Starts every child, supervises them to the end, and returns how each ended.
// Throws ddp::core::Error (Status::IO) when a child cannot be started; children
// already started are killed first.
JobResult run_job(const std::vector<ChildSpec>& children, const SupervisorOptions& opts);

// This process's environment with `set` applied on top and the variables
// named in `drop` removed: what a launcher hands its workers.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set,
                                           const std::vector<std::string>& drop);

// 128 random bits as hex: the DDP_JOB_ID a launcher hands its workers, under
// which they keep their store keys (see comm/group.cpp).
std::string random_job_id();

// "SIGKILL" for 9, and so on.
std::string signal_name(int sig);

// This program's argv (from /proc/self/cmdline) and executable (from
// /proc/self/exe): what a launcher that re-runs the program starts again.
std::vector<std::string> own_command_line();
std::string own_executable();
// The directory this process was in when libddp was loaded (before main(),
// where the program links it; at the import, for an interpreter): where a
// launcher that runs main again starts it, so that main's relative paths,
// and its own chdir calls, mean what they meant the first time. Empty when
// it could not be read then.
const std::string& program_start_dir();

// Threads of this process (from /proc/self/status); fork is only safe at 1.
int thread_count();

// A listening TCP socket on addr:port (port 0: any free port), bound to
// addr's address (every interface only when addr is empty or not an address
// of this host). The caller
// owns the fd; *port_out receives the bound port. Binding happens once and
// the socket is handed to rank 0's store, so no other process can take the
// port in between (the race of bind-then-close).
int listen_socket(const std::string& addr, int port, int* port_out);

}  // namespace ddp::core::launch
