// Running a save as if the disk filled up midway: in a forked child whose
// files may grow to a limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so that a
// write past it fails with EFBIG as one on a full disk fails with ENOSPC),
// without filling any disk.
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

struct LimitedRun {
  bool exited = false;  // the child ended by itself, with status 0
  std::string report;   // what `run` returned, or why the child did not end so
  pid_t pid = -1;       // the child's (a temporary file a save makes is named by it)
};

// Forks a child that sets the limit, runs `run` and hands its string back.
// The parent must not hold threads the child needs (at::set_num_threads(1)).
inline LimitedRun run_with_file_size_limit(rlim_t limit, const std::function<std::string()>& run) {
  LimitedRun out;
  int fds[2];
  if (pipe(fds) != 0) return out;
  out.pid = fork();
  if (out.pid == 0) {
    close(fds[0]);
    signal(SIGXFSZ, SIG_IGN);
    rlimit r{limit, limit};
    setrlimit(RLIMIT_FSIZE, &r);
    const std::string report = run();
    const ssize_t w = write(fds[1], report.data(), report.size());
    _exit(w == static_cast<ssize_t>(report.size()) ? 0 : 1);
  }
  close(fds[1]);
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.report.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  if (out.pid > 0) waitpid(out.pid, &st, 0);
  out.exited = out.pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (out.pid > 0 && WIFSIGNALED(st)) out.report = "killed by signal " + std::to_string(WTERMSIG(st)) + ": " + out.report;
  return out;
}

// The same child without a limit: `run` in a process of its own (one that
// may run out of descriptors, or die of a signal, without the test).
inline LimitedRun run_in_child(const std::function<std::string()>& run) {
  return run_with_file_size_limit(RLIM_INFINITY, run);
}
