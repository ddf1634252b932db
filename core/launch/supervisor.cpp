#include "launch/supervisor.h"
#include "launch/waitable_children.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "common/error.h"

extern char** environ;

namespace ddp::core::launch {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

namespace {

struct Running {
  pid_t pid = -1;
  int out_fd = -1;
  std::string partial;
};

// Everything exec needs is prepared before fork: after fork only
// async-signal-safe calls are made on the exec path.
struct ExecArgs {
  std::vector<std::string> storage_argv, storage_env;
  std::string path, cwd;
  std::vector<char*> argv, envp;
  explicit ExecArgs(const ChildSpec& c)
      : storage_argv(c.argv), storage_env(c.env), path(c.exe.empty() && !c.argv.empty() ? c.argv[0] : c.exe),
        cwd(c.cwd) {
    for (auto& a : storage_argv) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : storage_env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

void child_common_setup(pid_t parent, int out_fd, const std::vector<int>& keep_fds, rlim_t descriptor_limit,
                        bool stdin_from_null) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(125);  // the parent died before prctl
  // Its own process group, so that stopping a worker also reaches whatever
  // it started (a shell script's commands, a data loader's processes).
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
  if (out_fd >= 0) {
    dup2(out_fd, 1);
    dup2(out_fd, 2);
  }
  if (stdin_from_null) {
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0 && null_fd != 0) {
      dup2(null_fd, 0);
      close(null_fd);
    }
  }
  for (int fd : keep_fds) {
    int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
  }
  rlimit r{};
  if (descriptor_limit > 0 && getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = std::min(descriptor_limit, r.rlim_max);
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

pid_t start_child(const ChildSpec& c, int* out_read_fd) {
  int p[2] = {-1, -1};
  if (c.capture_output && pipe2(p, O_CLOEXEC) != 0)
    fail(Status::IO, std::string("pipe: ") + std::strerror(errno));
  ExecArgs args(c);
  pid_t parent = getpid();
  fflush(nullptr);  // or buffered output is written twice
  pid_t pid = fork();
  if (pid < 0) {
    if (p[0] >= 0) { close(p[0]); close(p[1]); }
    fail(Status::IO, std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    child_common_setup(parent, p[1], c.keep_fds, c.descriptor_limit, c.stdin_from_null);
    if (c.body) {
      // fork start method: the caller guaranteed a single-threaded parent.
      clearenv();
      for (auto& kv : c.env) putenv(const_cast<char*>(kv.c_str()));
      int rc = 1;
      try {
        rc = c.body();
      } catch (...) {
        rc = 1;
      }
      fflush(nullptr);
      _exit(rc);
    }
    // Only async-signal-safe calls here: write(2) of pieces, no formatting.
    const bool entered = args.cwd.empty() || chdir(args.cwd.c_str()) == 0;
    if (entered) execve(args.path.c_str(), args.argv.data(), args.envp.data());
    int err = errno;
    const char* parts[] = {entered ? "ddp launcher: cannot execute '" : "ddp launcher: cannot enter the directory '",
                           entered ? args.path.c_str() : args.cwd.c_str(),
                           entered ? "': " : "' where the program started: ",
                           strerrorname_np(err), " (", strerror(err), ")\n"};
    for (const char* p : parts) {
      if (!p) continue;
      ssize_t ignored = write(2, p, std::strlen(p));
      (void)ignored;
    }
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no window in which a signal misses the group
  if (p[1] >= 0) close(p[1]);
  if (p[0] >= 0) fcntl(p[0], F_SETFL, O_NONBLOCK);
  *out_read_fd = p[0];
  return pid;
}

// The worker and its process group (what it started itself).
void signal_worker(pid_t pid, int sig) {
  kill(-pid, sig);
  kill(pid, sig);
}

void emit_lines(int rank, Running& r, const SupervisorOptions& o, bool flush) {
  size_t start = 0, nl;
  while ((nl = r.partial.find('\n', start)) != std::string::npos) {
    if (o.on_line) o.on_line(rank, r.partial.substr(start, nl - start));
    start = nl + 1;
  }
  r.partial.erase(0, start);
  if (flush && !r.partial.empty()) {
    if (o.on_line) o.on_line(rank, r.partial);
    r.partial.clear();
  }
}

void drain(int rank, Running& r, const SupervisorOptions& o) {
  if (r.out_fd < 0) return;
  char buf[8192];
  for (;;) {
    ssize_t n = read(r.out_fd, buf, sizeof(buf));
    if (n > 0) {
      r.partial.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {  // writer closed: the child (and its children) ended
      close(r.out_fd);
      r.out_fd = -1;
    }
    break;
  }
  emit_lines(rank, r, o, r.out_fd < 0);
}

}  // namespace

std::string ChildStatus::describe() const {
  if (!ended) return "still running";
  if (status_lost)
    return "an end whose status another waiter took (the program's SIGCHLD handler reaps every child: let it "
           "wait for its own children by pid)";
  if (signal) return "signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  if (never_reached) return "exit code 0 without reaching the work it was started for";
  return "exit code " + std::to_string(exit_code);
}

std::string JobResult::summary() const {
  std::ostringstream o;
  if (first_failure >= 0) {
    const auto& f = children[first_failure];
    o << "root cause: rank " << f.rank << " (pid " << f.pid << ") failed first with " << f.describe()
      << " after " << f.seconds << " s";
  } else if (timed_out) {
    o << "the job ran past its timeout and was stopped";
  } else if (stop_signal) {
    o << "stopped by " << signal_name(stop_signal);
  } else if (stopped_by_check) {
    o << "stopped because the job failed elsewhere";
  } else {
    o << "all workers succeeded";
  }
  o << ". Workers:";
  for (size_t i = 0; i < children.size(); ++i) {
    const auto& c = children[i];
    o << " rank " << c.rank << " (pid " << c.pid << "): " << c.describe();
    if (static_cast<int>(i) == first_failure) o << " [first failure]";
    else if (c.stopped_by_us) o << " [stopped by the launcher]";
    o << ";";
  }
  return o.str();
}

std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set,
                                           const std::vector<std::string>& drop) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = std::find(drop.begin(), drop.end(), key) != drop.end();
    for (auto& s : set) replaced |= s.first == key;
    if (!replaced) env.push_back(kv);
  }
  for (auto& s : set) env.push_back(s.first + "=" + s.second);
  return env;
}

std::string random_job_id() {
  unsigned char bytes[16] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  ssize_t got = fd >= 0 ? read(fd, bytes, sizeof(bytes)) : -1;
  if (fd >= 0) close(fd);
  if (got != static_cast<ssize_t>(sizeof(bytes))) fail(Status::IO, "cannot read /dev/urandom for a job id");
  static const char* hex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(hex[b >> 4]);
    id.push_back(hex[b & 15]);
  }
  return id;
}

std::vector<std::string> own_command_line() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t start = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == '\0') {
      argv.push_back(all.substr(start, i - start));
      start = i + 1;
    }
  return argv;
}

namespace {
std::string current_dir() {
  std::vector<char> buf(4096);
  while (getcwd(buf.data(), buf.size()) == nullptr) {
    if (errno != ERANGE || buf.size() >= (1u << 20)) return "";  // removed, or not readable
    buf.resize(buf.size() * 2);
  }
  return buf.data();
}
// Read when the library is loaded: before main() for a program linked
// with it.
const std::string g_start_dir = current_dir();
}  // namespace

const std::string& program_start_dir() { return g_start_dir; }

std::string own_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) fail(Status::IO, "cannot read /proc/self/exe");
  return std::string(buf, static_cast<size_t>(n));
}

int thread_count() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

namespace {
// Binds and listens on the first address of `host` (nullptr: every
// interface) that works; -1 with *err set when none does.
int bind_listen(const char* host, int port, int* err) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host, service.c_str(), &hints, &res);
  if (rc != 0)
    fail(Status::IO, "cannot resolve the master address '" + std::string(host ? host : "") + "': " + gai_strerror(rc));
  int fd = -1;
  *err = 0;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET6 && ai->ai_family != AF_INET) continue;
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6 && !host) {
      int zero = 0;  // the wildcard is dual stack: IPv4 clients too
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    }
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 2048) == 0) break;
    *err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  return fd;
}
}  // namespace

int listen_socket(const std::string& addr, int port, int* port_out) {
  // Bound to the address the job uses, so a loopback job's store cannot be
  // reached from another host. An address that is not this host's (a name
  // that resolves to a NAT or load-balancer address) cannot be bound: then,
  // as torch does, every interface.
  int err = 0;
  int fd = addr.empty() ? -1 : bind_listen(addr.c_str(), port, &err);
  if (fd < 0 && (addr.empty() || err == EADDRNOTAVAIL)) fd = bind_listen(nullptr, port, &err);
  if (fd < 0) {
    if (err == EADDRINUSE)
      fail(Status::IO, "port " + std::to_string(port) + " is already in use; choose another MASTER_PORT");
    fail(Status::IO, "cannot listen on " + addr + ":" + std::to_string(port) + ": " + std::strerror(err));
  }
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *port_out = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

JobResult run_job(const std::vector<ChildSpec>& specs, const SupervisorOptions& o) {
  const WaitableChildren waitable;  // from before the first fork to the last wait
  JobResult res;
  std::vector<Running> run(specs.size());
  auto t0 = Clock::now();
  for (size_t i = 0; i < specs.size(); ++i) {
    try {
      run[i].pid = start_child(specs[i], &run[i].out_fd);
    } catch (...) {
      for (size_t j = 0; j < i; ++j) {
        kill(run[j].pid, SIGKILL);
        waitpid(run[j].pid, nullptr, 0);
        if (run[j].out_fd >= 0) close(run[j].out_fd);
      }
      throw;
    }
    ChildStatus st;
    st.rank = specs[i].rank;
    st.pid = run[i].pid;
    res.children.push_back(st);
  }

  bool stopping = false;
  Clock::time_point kill_at{};
  Clock::time_point next_check = t0 + o.check_interval;
  auto begin_stop = [&](int sig) {
    if (stopping) return;
    stopping = true;
    kill_at = Clock::now() + o.grace;
    for (size_t i = 0; i < run.size(); ++i) {
      if (res.children[i].ended) continue;
      res.children[i].stopped_by_us = true;
      signal_worker(run[i].pid, sig);
    }
  };

  size_t alive = run.size();
  while (alive > 0 || [&] {
    for (auto& r : run)
      if (r.out_fd >= 0) return true;
    return false;
  }()) {
    std::vector<pollfd> pfds;
    std::vector<size_t> owner;
    for (size_t i = 0; i < run.size(); ++i)
      if (run[i].out_fd >= 0) {
        pfds.push_back({run[i].out_fd, POLLIN, 0});
        owner.push_back(i);
      }
    if (!pfds.empty()) {
      poll(pfds.data(), pfds.size(), static_cast<int>(o.poll.count()));
    } else {
      usleep(static_cast<useconds_t>(o.poll.count() * 1000));
    }
    for (size_t k = 0; k < owner.size(); ++k) drain(specs[owner[k]].rank, run[owner[k]], o);

    for (size_t i = 0; i < run.size(); ++i) {
      auto& st = res.children[i];
      if (st.ended) continue;
      int status = 0;
      pid_t w = waitpid(run[i].pid, &status, WNOHANG);
      // ECHILD: someone else waited for it (a SIGCHLD handler of the
      // program's that reaps every child): it has ended, and how is lost.
      const bool lost = w < 0 && errno == ECHILD;
      if (w != run[i].pid && !lost) continue;
      st.ended = true;
      st.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      if (lost) st.status_lost = true;
      else if (WIFSIGNALED(status)) st.signal = WTERMSIG(status);
      else st.exit_code = WEXITSTATUS(status);
      st.never_reached = st.ok() && !specs[i].reached_file.empty() && access(specs[i].reached_file.c_str(), F_OK) != 0;
      kill(-run[i].pid, SIGKILL);  // anything the worker left behind in its group
      --alive;
      if (!st.ok() && res.first_failure < 0 && !st.stopped_by_us) {
        res.first_failure = static_cast<int>(i);
        begin_stop(SIGTERM);
      }
      // A child that ended leaves its pipe to be drained; if a grandchild
      // keeps it open we stop reading once every child has ended.
    }
    if (alive == 0) {
      for (size_t i = 0; i < run.size(); ++i) {
        drain(specs[i].rank, run[i], o);
        if (run[i].out_fd >= 0) {
          close(run[i].out_fd);
          run[i].out_fd = -1;
          emit_lines(specs[i].rank, run[i], o, true);
        }
      }
      break;
    }
    auto now = Clock::now();
    if (o.stop_request && o.stop_request->load() && !stopping) {
      res.stop_signal = o.stop_request->load();
      begin_stop(res.stop_signal);
    }
    if (o.should_stop && !stopping && now >= next_check) {
      next_check = now + o.check_interval;
      if (o.should_stop(res.children)) {
        res.stopped_by_check = true;
        begin_stop(SIGTERM);
      }
    }
    if (o.job_timeout.count() > 0 && now - t0 > o.job_timeout && !stopping) {
      res.timed_out = true;
      begin_stop(SIGTERM);
    }
    if (stopping && now > kill_at) {
      for (size_t i = 0; i < run.size(); ++i)
        if (!res.children[i].ended) signal_worker(run[i].pid, SIGKILL);
    }
  }
  return res;
}

}  // namespace ddp::core::launch
