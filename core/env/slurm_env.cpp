// SLURM (srun): Lightning's SLURMEnvironment.
#include "env/env_vars.h"
#include "env/environments.h"

#include "common/error.h"

namespace ddp::environments {
using namespace envvars;

namespace {
// Lightning skips SLURM when the job is an interactive shell.
bool interactive(const EnvLookup& env) {
  std::string job = get_str(env, "SLURM_JOB_NAME", "");
  return job == "bash" || job == "interactive";
}
}  // namespace

bool slurm_detect(const EnvLookup& env) { return has(env, "SLURM_NTASKS") && !interactive(env); }

std::string slurm_first_host(const std::string& nodelist) {
  // The first entry at bracket depth 0, ended by ',' or ' '.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (depth == 0 && (c == ',' || c == ' ')) {
      if (!first.empty()) break;
      continue;
    }
    if (c == '[') ++depth;
    if (c == ']') --depth;
    first.push_back(c);
  }
  // "node[01-04,07]" -> "node" + "01": the first item of the range.
  auto open = first.find('[');
  if (open != std::string::npos) {
    auto close = first.find(']', open);
    std::string range = first.substr(open + 1, close == std::string::npos ? std::string::npos
                                                                          : close - open - 1);
    std::string head = range.substr(0, range.find_first_of(",-"));
    std::string tail = close == std::string::npos ? "" : first.substr(close + 1);
    first = first.substr(0, open) + head + tail;
  }
  return first;
}

ClusterEnv slurm_read(const EnvLookup& env) {
  const char* who = "slurm";
  ClusterEnv e;
  e.name = who;
  e.world_size = require_int(env, "SLURM_NTASKS", 1, 1 << 24, who);
  e.rank = require_int(env, "SLURM_PROCID", 0, e.world_size - 1, who);
  e.local_rank = require_int(env, "SLURM_LOCALID", 0, e.world_size - 1, who);
  e.node_rank = require_int(env, "SLURM_NODEID", 0, e.world_size - 1, who);
  int nnodes = get_int(env, "SLURM_NNODES", 0, 1, 1 << 24);
  e.local_world_size = nnodes > 0 ? (e.world_size + nnodes - 1) / nnodes : e.world_size;
  if (e.local_rank >= e.local_world_size) e.local_world_size = e.local_rank + 1;

  if (auto addr = env("MASTER_ADDR")) {
    e.master_addr = *addr;
  } else {
    std::string nodes = get_str(env, "SLURM_NODELIST", "127.0.0.1");
    e.master_addr = slurm_first_host(nodes);
    check_arg(!e.master_addr.empty(), "SLURM_NODELIST='" + nodes + "' names no host");
  }

  if (auto port = env("MASTER_PORT")) {
    e.master_port = parse_port("MASTER_PORT", *port);
  } else if (auto job = env("SLURM_JOB_ID")) {
    // Lightning: 15000 + the last four digits of the job id.
    std::string digits = job->size() > 4 ? job->substr(job->size() - 4) : *job;
    e.master_port = 15000 + parse_int("SLURM_JOB_ID", digits, 0, 9999);
  } else {
    e.master_port = 12910;
  }
  return e;
}

}  // namespace ddp::environments
