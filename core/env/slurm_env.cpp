// SLURM (srun): Lightning's SLURMEnvironment.
#include "env/env_vars.h"
#include "env/environments.h"

#include "common/error.h"

namespace ddp::core::environments {
using namespace envvars;

namespace {
// Lightning skips SLURM when the job is an interactive shell.
bool interactive(const EnvLookup& env) {
  std::string job = get_str(env, "SLURM_JOB_NAME", "");
  return job == "bash" || job == "interactive";
}
}  // namespace

bool slurm_detect(const EnvLookup& env) { return has(env, "SLURM_NTASKS") && !interactive(env); }

// SLURM's hostlist syntax: entries separated by ',' (or ' ') outside
// brackets; an entry is text with bracket groups of comma-separated numbers
// or ranges ("node[01-04,07]", "rack[1-2]n[3-4]"). The first host takes the
// first item of every group ("rack1n3"), keeping zero padding. Anything that
// does not follow the syntax is an error: a guess would send every rank to
// the wrong rendezvous host.
std::string slurm_first_host(const std::string& nodelist) {
  auto bad = [&](const std::string& why) {
    fail(Status::InvalidArgument, "SLURM_NODELIST='" + nodelist + "' is malformed: " + why);
  };
  auto is_digits = [](const std::string& v) {
    return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
  };
  std::string first;       // the first entry, expanded
  bool first_done = false;
  bool in_entry = false;
  size_t i = 0;
  while (i < nodelist.size()) {
    char c = nodelist[i];
    if (c == ',' || c == ' ') {
      if (in_entry) first_done = true;
      in_entry = false;
      ++i;
      continue;
    }
    if (c == ']') bad("']' at position " + std::to_string(i) + " closes no '['");
    in_entry = true;
    if (c != '[') {
      if (!first_done) first.push_back(c);
      ++i;
      continue;
    }
    size_t close = nodelist.find(']', i + 1);
    if (close == std::string::npos) bad("'[' at position " + std::to_string(i) + " is never closed");
    std::string group = nodelist.substr(i + 1, close - i - 1);
    if (group.find('[') != std::string::npos) bad("brackets nest at position " + std::to_string(i));
    if (group.empty()) bad("empty brackets at position " + std::to_string(i));
    std::string head;
    size_t start = 0;
    for (;;) {
      size_t comma = group.find(',', start);
      std::string item = group.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      size_t dash = item.find('-');
      std::string lo = item.substr(0, dash);
      std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
      if (!is_digits(lo) || !is_digits(hi)) bad("'" + item + "' is not a number or a range of numbers");
      if (lo.size() > 9 || hi.size() > 9 || std::stol(lo) > std::stol(hi))
        bad("the range '" + item + "' is empty or too large");
      if (head.empty()) head = lo;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (!first_done) first += head;
    i = close + 1;
  }
  if (first.empty()) bad("it names no host");
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

}  // namespace ddp::core::environments
