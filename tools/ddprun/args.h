// ddprun's command line: torchrun's flags, so that existing job scripts work.
#pragma once

#include <string>
#include <vector>

namespace ddprun {

struct DdprunArgs {
  int nproc_per_node = 1;
  int nnodes = 1;     // this round's node count (elastic: set by each round's rendezvous)
  int node_rank = 0;  // elastic: 0 hosts the store and closes the rounds; each round numbers the nodes anew
  // --nnodes MIN:MAX with MIN < MAX: elastic membership (elastic.h).
  int min_nodes = 1, max_nodes = 1;
  double last_call_s = 30;  // --rdzv-conf last_call_timeout: an elastic round closes this long after its last arrival
  bool elastic() const { return min_nodes < max_nodes; }
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0 with --standalone: any free port
  int max_restarts = 0;
  double monitor_interval_s = 0.1;
  double rdzv_timeout_s = 900;
  double grace_period_s = 5;
  double agent_timeout_s = 15;  // a silent agent of another node = a lost node (the heartbeat window)
  std::string run_id = "none";
  std::vector<int> local_ranks_filter;  // empty: every rank's output
  std::string error_file;               // also from TORCHELASTIC_ERROR_FILE
  bool no_python = false;
  bool module = false;
  std::string python = "python3";
  std::vector<std::string> command;  // the program and its arguments
};

// Throws ddp::core::Error(Status::InvalidArgument) naming the bad flag.
DdprunArgs parse_ddprun_args(const std::vector<std::string>& argv);

std::string ddprun_usage();

// The argv the workers run: python for *.py and -m, else the program itself.
std::vector<std::string> worker_argv(const DdprunArgs& a);

}  // namespace ddprun
