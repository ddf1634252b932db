#include "strategy/popen_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "common/error.h"
#include "launch/worker_env.h"

namespace ddp::core {

void PopenLauncher::export_var(const std::string& name, const std::string& value) {
  const char* old = std::getenv(name.c_str());
  exported_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
  setenv(name.c_str(), value.c_str(), 1);
}

void PopenLauncher::restore_exported() {
  for (auto it = exported_.rbegin(); it != exported_.rend(); ++it) {
    if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
    else unsetenv(it->first.c_str());
  }
  exported_.clear();
}

ClusterEnv PopenLauncher::launch(int nprocs, const std::string& master_addr, Millis grace) {
  check_arg(nprocs >= 2, "popen launcher: needs at least 2 processes");
  int port = 0;
  int listen_fd = launch::listen_socket(master_addr, 0, &port);
  std::string job_id = launch::random_job_id();
  std::vector<launch::ChildSpec> children;
  auto argv = launch::own_command_line();
  std::string exe = launch::own_executable();
  for (int r = 1; r < nprocs; ++r) {
    launch::WorkerPlace w;
    w.rank = w.local_rank = r;
    w.world_size = w.local_world_size = nprocs;
    w.master_addr = master_addr;
    w.master_port = port;
    w.job_id = job_id;
    launch::ChildSpec c;
    c.rank = r;
    c.argv = argv.empty() ? std::vector<std::string>{exe} : argv;
    c.exe = exe;
    c.cwd = launch::program_start_dir();  // main runs again from where it ran first
    c.env = launch::worker_env(w);
    children.push_back(std::move(c));
  }
  // This process's own group finds the socket and the job id here.
  export_var("DDP_MASTER_LISTEN_FD", std::to_string(listen_fd));
  export_var("DDP_JOB_ID", job_id);
  launch::SupervisorOptions so;
  so.grace = grace;
  so.stop_request = &stop_;
  // A rank that ends before the group is made (a failure in the program
  // before its setup, or a main that never reaches it) would leave this
  // process waiting in the rendezvous for its whole timeout (30 minutes by
  // default): the strategy asks ended_rank() while it waits.
  so.check_interval = Millis(50);
  so.should_stop = [this](const std::vector<launch::ChildStatus>& children) {
    note_ended(children);
    return false;
  };
  // The supervising thread is the children's parent thread: they get
  // PDEATHSIG when it ends, so it runs until they have all ended.
  supervisor_ = std::thread([this, children = std::move(children), so] {
    try {
      result_ = launch::run_job(children, so);
    } catch (const std::exception& e) {
      start_error_ = e.what();
    }
    done_.store(true);
  });
  ClusterEnv env;
  env.name = "popen";
  env.rank = 0;
  env.world_size = nprocs;
  env.local_rank = 0;
  env.local_world_size = nprocs;
  env.node_rank = 0;
  env.master_addr = master_addr;
  env.master_port = port;
  return env;
}

void PopenLauncher::note_ended(const std::vector<launch::ChildStatus>& children) {
  std::lock_guard<std::mutex> lock(ended_m_);
  for (const auto& c : children)
    if (c.ended && !ended_)
      ended_ = "rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) +
               "), which this process started, ended with " + c.describe() + " before the group was made";
}

std::optional<std::string> PopenLauncher::ended_rank() {
  // Once every rank has ended the supervisor is done and asks no more.
  if (done_.load()) note_ended(result_.children);
  std::lock_guard<std::mutex> lock(ended_m_);
  return ended_;
}

std::string PopenLauncher::failed_rank(Millis wait) {
  if (!supervisor_.joinable()) return "";
  auto deadline = std::chrono::steady_clock::now() + wait;
  while (!done_.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(Millis(10));
  if (!done_.load() || result_.first_failure < 0) return "";
  const auto& c = result_.children[static_cast<size_t>(result_.first_failure)];
  return "local rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) + ") ended with " + c.describe();
}

void PopenLauncher::finish(Millis timeout) {
  restore_exported();
  if (!supervisor_.joinable()) return;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done_.load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(Millis(20));
  if (!done_.load()) stop_.store(SIGTERM);  // SIGTERM, then SIGKILL after the grace period
  supervisor_.join();
  if (!start_error_.empty()) fail(Status::IO, "popen launcher: " + start_error_);
  if (result_.first_failure >= 0) fail(Status::WorkerFailed, "popen launcher: " + result_.summary());
  if (result_.stop_signal)
    fail(Status::Timeout, "popen launcher: the other ranks did not end within " + std::to_string(timeout.count()) +
                              " ms after teardown and were stopped: " + result_.summary());
}

PopenLauncher::~PopenLauncher() {
  try {
    finish(Millis(0));
  } catch (...) {
  }
}

}  // namespace ddp::core
