// IBM LSF / jsrun: Lightning's LSFEnvironment.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fstream>
#include <map>
#include <vector>

#include "common/error.h"
#include "env/env_vars.h"
#include "env/environments.h"

namespace ddp::core::environments {
using namespace envvars;

bool lsf_detect(const EnvLookup& env) {
  return has(env, "LSB_JOBID") && has(env, "LSB_DJOB_RANKFILE") &&
         has(env, "JSM_NAMESPACE_LOCAL_RANK") && has(env, "JSM_NAMESPACE_SIZE");
}

namespace {
// A rank file lists one host per rank: 64 MiB is millions of ranks.
constexpr off_t kMaxRankFileBytes = 64 << 20;

// The rank file's hosts, without its first line (the launch node).
std::vector<std::string> compute_hosts(const EnvLookup& env) {
  std::string path = require_str(env, "LSB_DJOB_RANKFILE", "lsf");
  check_arg(!path.empty(), "LSB_DJOB_RANKFILE='' is empty");
  // Only a regular file of bounded size: a FIFO would block the reader and
  // /dev/zero would never end.
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    fail(Status::IO, "LSB_DJOB_RANKFILE='" + path + "' cannot be read: " + std::strerror(errno));
  check_arg(S_ISREG(st.st_mode), "LSB_DJOB_RANKFILE='" + path + "' is not a regular file");
  check_arg(st.st_size <= kMaxRankFileBytes, "LSB_DJOB_RANKFILE='" + path + "' has " +
                                                 std::to_string(st.st_size) + " bytes, more than the " +
                                                 std::to_string(kMaxRankFileBytes) + " a rank file may have");
  std::ifstream in(path);
  if (!in) fail(Status::IO, "LSB_DJOB_RANKFILE='" + path + "' cannot be read");
  std::vector<std::string> hosts;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    auto b = line.find_first_not_of(" \t\r");
    auto e = line.find_last_not_of(" \t\r");
    std::string host = b == std::string::npos ? "" : line.substr(b, e - b + 1);
    if (first) { first = false; continue; }
    if (!host.empty()) hosts.push_back(host);
  }
  check_arg(!hosts.empty(), "LSB_DJOB_RANKFILE='" + path + "' lists no compute host");
  return hosts;
}
}  // namespace

ClusterEnv lsf_read(const EnvLookup& env) {
  const char* who = "lsf";
  ClusterEnv e;
  e.name = who;
  e.world_size = require_int(env, "JSM_NAMESPACE_SIZE", 1, 1 << 24, who);
  e.rank = require_int(env, "JSM_NAMESPACE_RANK", 0, e.world_size - 1, who);
  e.local_rank = require_int(env, "JSM_NAMESPACE_LOCAL_RANK", 0, e.world_size - 1, who);
  auto hosts = compute_hosts(env);
  e.master_addr = hosts.front();
  int job = require_int(env, "LSB_JOBID", 0, 2147483647, who);
  e.master_port = 10000 + job % 1000;  // Lightning's rule

  std::map<std::string, int> node_index;
  std::map<std::string, int> per_host;
  for (auto& h : hosts) {
    node_index.emplace(h, static_cast<int>(node_index.size()));
    per_host[h]++;
  }
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  auto it = node_index.find(name);
  check_arg(it != node_index.end(), "LSB_DJOB_RANKFILE does not list this host ('" +
                                        std::string(name) + "')");
  e.node_rank = it->second;
  e.local_world_size = per_host[name];
  if (e.local_rank >= e.local_world_size) e.local_world_size = e.local_rank + 1;
  return e;
}

}  // namespace ddp::core::environments
