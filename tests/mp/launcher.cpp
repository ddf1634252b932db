#include "launcher.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace ddptest {

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

int occupy_port(int* port) {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_any;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 1) != 0) abort();
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin6_port);
  return fd;
}

std::string worker_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string self(buf, n > 0 ? n : 0);
  return self.substr(0, self.rfind('/')) + "/mp_worker";
}

std::string RunResult::summary() const {
  std::ostringstream o;
  o << "run took " << seconds << " s" << (timed_out ? " (TIMED OUT)" : "") << "\n";
  for (size_t r = 0; r < ranks.size(); ++r) {
    o << "--- rank " << r << ": exit " << ranks[r].exit_code << " signal " << ranks[r].signal << "\n"
      << ranks[r].output;
  }
  return o.str();
}

namespace {
RunResult run_processes(int world, const std::vector<std::string>& argv,
                        const std::vector<std::string>& env, double limit_s,
                        const std::vector<int>& skip, bool rank_env);
}

RunResult run_ranks(int world, const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    double limit_s, const std::vector<int>& skip) {
  return run_processes(world, argv, env, limit_s, skip, true);
}

RunResult run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                      double limit_s) {
  return run_processes(1, argv, env, limit_s, {}, false);
}

namespace {
RunResult run_processes(int world, const std::vector<std::string>& argv,
                        const std::vector<std::string>& env, double limit_s,
                        const std::vector<int>& skip, bool rank_env) {
  RunResult res;
  res.ranks.resize(world);
  int port = free_port();
  std::vector<pid_t> pids(world, -1);
  std::vector<int> fds(world, -1);
  auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < world; ++r) {
    bool skipped = false;
    for (int s : skip) skipped |= s == r;
    if (skipped) continue;
    int p[2];
    if (pipe(p) != 0) abort();
    pid_t pid = fork();
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(p[1], 1);
      dup2(p[1], 2);
      close(p[0]);
      close(p[1]);
      // LOCAL_WORLD_SIZE=k in `env` simulates nodes of k ranks each.
      int per_node = world;
      for (auto& kv : env)
        if (kv.rfind("LOCAL_WORLD_SIZE=", 0) == 0) per_node = std::atoi(kv.c_str() + 17);
      std::vector<std::string> e = {"OMP_NUM_THREADS=1"};
      if (rank_env)
        e.insert(e.end(), {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                           "WORLD_SIZE=" + std::to_string(world), "RANK=" + std::to_string(r),
                           "LOCAL_RANK=" + std::to_string(r % per_node),
                           "NODE_RANK=" + std::to_string(r / per_node)});
      e.insert(e.end(), env.begin(), env.end());
      for (auto& kv : e) putenv(strdup(kv.c_str()));
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    pids[r] = pid;
    fds[r] = p[0];
  }
  auto drain = [&](int r) {
    char buf[4096];
    ssize_t n;
    while (fds[r] >= 0 && (n = read(fds[r], buf, sizeof(buf))) > 0) res.ranks[r].output.append(buf, n);
  };
  int alive = 0;
  for (auto p : pids) alive += p > 0;
  while (alive > 0) {
    for (int r = 0; r < world; ++r) {
      drain(r);
      if (pids[r] <= 0) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) == pids[r]) {
        if (WIFEXITED(st)) res.ranks[r].exit_code = WEXITSTATUS(st);
        if (WIFSIGNALED(st)) res.ranks[r].signal = WTERMSIG(st);
        pids[r] = -1;
        --alive;
      }
    }
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el > limit_s && !res.timed_out) {
      res.timed_out = true;
      for (auto p : pids)
        if (p > 0) kill(p, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < world; ++r) {
    drain(r);
    if (fds[r] >= 0) close(fds[r]);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}
}  // namespace

bool any_process_tagged(const std::string& tag) {
  std::string needle = "DDP_TEST_TAG=" + tag;
  DIR* d = opendir("/proc");
  if (!d) return false;
  bool found = false;
  while (auto* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream f(std::string("/proc/") + e->d_name + "/environ", std::ios::binary);
    std::string env((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // A zombie has an empty environ; a live process of the test has the tag.
    if (env.find(needle + '\0') != std::string::npos || env.size() >= needle.size() &&
        env.compare(env.size() - needle.size(), needle.size(), needle) == 0) {
      found = true;
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace ddptest
