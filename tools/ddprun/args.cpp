#include "args.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "common/error.h"

namespace ddprun {
using ddp::core::check_arg;
using ddp::core::fail;
using ddp::core::Status;
namespace {

int to_int(const std::string& flag, const std::string& v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v.c_str(), &end, 10);
  check_arg(!v.empty() && end && *end == '\0' && x >= lo && x <= hi,
            flag + " '" + v + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(x);
}

double to_seconds(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  // At most kMaxTimeout, a group's longest: the agent turns these into
  // milliseconds and its deadlines into nanoseconds ("inf" and 1e300 were
  // taken, and converted with undefined behaviour).
  constexpr double kMostSeconds = ddp::core::kMaxTimeout.count() / 1000.0;
  if (!v.empty() && end && *end == '\0' && x >= 0 && x <= kMostSeconds) return x;
  char most[32];
  std::snprintf(most, sizeof most, "%.3f", kMostSeconds);
  fail(Status::InvalidArgument, flag + " '" + v + "' must be a number of seconds from 0 to " + most + " (about 24.8 days)");
}

// torchrun accepts both --nproc-per-node and --nproc_per_node.
std::string canonical(std::string flag) {
  for (auto& c : flag)
    if (c == '_') c = '-';
  return flag;
}

}  // namespace

std::string ddprun_usage() {
  return "usage: ddprun [--nproc-per-node N|auto] [--nnodes N|MIN:MAX] [--node-rank R] [--master-addr A]\n"
         "              [--rdzv-conf last_call_timeout=S,join_timeout=S]\n"
         "              [--master-port P] [--standalone] [--max-restarts K] [--monitor-interval S]\n"
         "              [--run-id|--rdzv-id ID] [--rdzv-timeout S] [--grace-period S] [--agent-timeout S]\n"
         "              [--local-ranks-filter 0,1]\n"
         "              [--error-file PATH] [--no-python] [-m] [--python PY] program [args...]\n";
}

DdprunArgs parse_ddprun_args(const std::vector<std::string>& argv) {
  DdprunArgs a;
  if (const char* ef = std::getenv("TORCHELASTIC_ERROR_FILE")) a.error_file = ef;
  bool standalone = false;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-", 0) != 0) break;  // the program
    if (arg == "--") {
      ++i;
      break;
    }
    std::string flag = arg, value;
    bool has_inline = false;
    auto eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_inline = true;
    }
    flag = canonical(flag);
    auto take = [&]() -> std::string {
      if (has_inline) return value;
      check_arg(i + 1 < argv.size(), flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--nproc-per-node") {
      std::string v = take();
      if (v == "auto" || v == "cpu") a.nproc_per_node = std::max(1u, std::thread::hardware_concurrency());
      else a.nproc_per_node = to_int(flag, v, 1, 4096);
    } else if (flag == "--nnodes") {
      std::string v = take();
      auto colon = v.find(':');
      if (colon == std::string::npos) {
        a.min_nodes = a.max_nodes = to_int(flag, v, 1, 1 << 16);
      } else {  // torchrun's MIN:MAX
        a.min_nodes = to_int(flag, v.substr(0, colon), 1, 1 << 16);
        a.max_nodes = to_int(flag, v.substr(colon + 1), 1, 1 << 16);
        check_arg(a.min_nodes <= a.max_nodes, "--nnodes '" + v + "': MIN is larger than MAX");
      }
      a.nnodes = a.max_nodes;
    } else if (flag == "--rdzv-conf") {  // torchrun's KEY=VALUE,...; the keys ddprun has
      std::stringstream ss(take());
      std::string item;
      while (std::getline(ss, item, ',')) {
        auto eq = item.find('=');
        std::string key = item.substr(0, eq);
        check_arg(eq != std::string::npos, "--rdzv-conf '" + item + "' is not KEY=VALUE");
        if (key == "last_call_timeout") a.last_call_s = to_seconds(flag, item.substr(eq + 1));
        else if (key == "join_timeout") a.rdzv_timeout_s = to_seconds(flag, item.substr(eq + 1));
        else fail(Status::InvalidArgument, "--rdzv-conf: unknown key '" + key + "' (ddprun has last_call_timeout, join_timeout)");
      }
    } else if (flag == "--node-rank") {
      a.node_rank = to_int(flag, take(), 0, 1 << 16);
    } else if (flag == "--master-addr") {
      a.master_addr = take();
      check_arg(!a.master_addr.empty() && a.master_addr.find_first_of(" \t\n") == std::string::npos,
                "--master-addr '" + a.master_addr + "' is not a host name or address");
    } else if (flag == "--master-port") {
      a.master_port = to_int(flag, take(), 1, 65535);
    } else if (flag == "--standalone") {
      standalone = true;
    } else if (flag == "--max-restarts") {
      a.max_restarts = to_int(flag, take(), 0, 1 << 20);
    } else if (flag == "--monitor-interval") {
      a.monitor_interval_s = to_seconds(flag, take());
    } else if (flag == "--rdzv-timeout") {
      a.rdzv_timeout_s = to_seconds(flag, take());
    } else if (flag == "--agent-timeout") {
      a.agent_timeout_s = to_seconds(flag, take());
    } else if (flag == "--grace-period") {
      a.grace_period_s = to_seconds(flag, take());
    } else if (flag == "--run-id" || flag == "--rdzv-id") {  // torchrun takes either
      a.run_id = take();
    } else if (flag == "--local-ranks-filter") {
      std::stringstream ss(take());
      std::string item;
      while (std::getline(ss, item, ',')) a.local_ranks_filter.push_back(to_int(flag, item, 0, 4095));
    } else if (flag == "--error-file") {
      a.error_file = take();
    } else if (flag == "--no-python") {
      a.no_python = true;
    } else if (flag == "-m" || flag == "--module") {
      a.module = true;
    } else if (flag == "--python") {
      a.python = take();
    } else {
      fail(Status::InvalidArgument, "unknown option " + arg + "\n" + ddprun_usage());
    }
  }
  a.command.assign(argv.begin() + static_cast<long>(i), argv.end());
  check_arg(!a.command.empty(), "no program to run\n" + ddprun_usage());
  check_arg(a.node_rank < a.max_nodes, "--node-rank " + std::to_string(a.node_rank) + " must be < --nnodes " +
                                           std::to_string(a.max_nodes));
  check_arg(!(a.module && a.no_python), "-m and --no-python exclude each other");
  for (int lr : a.local_ranks_filter)
    check_arg(lr < a.nproc_per_node, "--local-ranks-filter names local rank " + std::to_string(lr) +
                                         ", but each node runs " + std::to_string(a.nproc_per_node) +
                                         " processes (local ranks 0.." + std::to_string(a.nproc_per_node - 1) + ")");
  if (standalone) {
    check_arg(a.max_nodes == 1, "--standalone runs one node; drop --nnodes");
    a.master_addr = "127.0.0.1";
    a.master_port = 0;
  }
  return a;
}

std::vector<std::string> worker_argv(const DdprunArgs& a) {
  std::vector<std::string> argv;
  const std::string& prog = a.command.front();
  bool python = !a.no_python && (a.module || (prog.size() > 3 && prog.compare(prog.size() - 3, 3, ".py") == 0));
  if (python) {
    argv = {a.python, "-u"};
    if (a.module) argv.push_back("-m");
  }
  argv.insert(argv.end(), a.command.begin(), a.command.end());
  return argv;
}

}  // namespace ddprun
