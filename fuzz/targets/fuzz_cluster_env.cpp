// Cluster environment variables as a scheduler (or a hostile user) may set
// them: SLURM node lists and task counts, LSF's rank file, MPI's and
// Kubeflow's variables, torchrun's and Lightning's. Input: "KEY=VALUE"
// lines, then optionally a line "--" and the content of LSF's rank file
// (LSB_DJOB_RANKFILE is pointed at it). Every reader must return a valid
// environment or throw ddp::core::Error; nothing else.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "common/error.h"
#include "env/cluster_env.h"
#include "env/environments.h"

namespace {
std::string rank_file;  // made once per process, removed when it exits

std::string rank_file_path() {
  if (rank_file.empty()) {
    char p[] = "/tmp/fuzz_rankfile_XXXXXX";
    int fd = mkstemp(p);
    if (fd >= 0) close(fd);
    rank_file = p;
    std::atexit([] { unlink(rank_file.c_str()); });
  }
  return rank_file;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddp::core;
  std::string in(reinterpret_cast<const char*>(data), size);
  std::string vars = in, rank_file;
  auto sep = in.find("\n--\n");
  bool has_rank_file = sep != std::string::npos;
  if (has_rank_file) {
    vars = in.substr(0, sep);
    rank_file = in.substr(sep + 4);
  }
  std::map<std::string, std::string> env;
  size_t at = 0;
  while (at <= vars.size()) {
    size_t end = vars.find('\n', at);
    if (end == std::string::npos) end = vars.size();
    std::string line = vars.substr(at, end - at);
    auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    at = end + 1;
  }
  if (has_rank_file) {
    if (FILE* f = std::fopen(rank_file_path().c_str(), "w")) {
      std::fwrite(rank_file.data(), 1, rank_file.size(), f);
      std::fclose(f);
    }
    env["LSB_DJOB_RANKFILE"] = rank_file_path();
  }
  EnvLookup lookup = [&env](const std::string& k) -> std::optional<std::string> {
    auto it = env.find(k);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto valid = [](const ClusterEnv& e) {
    // What every reader promises (validate_cluster_env's invariants).
    if (e.world_size < 1 || e.rank < 0 || e.rank >= e.world_size || e.local_rank < 0 ||
        e.local_world_size < 1 || e.local_rank >= e.local_world_size || e.node_rank < 0 || e.master_port < 0 ||
        e.master_port > 65535)
      std::abort();
  };
  try {
    valid(detect_cluster_env(lookup));
  } catch (const Error&) {
  }
  for (const char* name : {"torchelastic", "slurm", "lsf", "mpi", "lightning", "kubeflow"}) {
    try {
      valid(read_cluster_env(name, lookup));
    } catch (const Error&) {
    }
  }
  auto it = env.find("SLURM_NODELIST");
  if (it != env.end()) {
    try {
      environments::slurm_first_host(it->second);
    } catch (const Error&) {
    }
  }
  return 0;
}
