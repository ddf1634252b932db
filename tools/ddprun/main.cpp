// ddprun: launches and supervises the workers of a DDP job, with torchrun's
// flags and worker environment. Exit codes: 0 success, 1 a failed job, 2 a
// usage error, 128+signal when stopped.
#include <iostream>
#include <string>
#include <vector>

#include "agent.h"
#include "common/standard_streams.h"
#include "args.h"

int main(int argc, char** argv) {
  // The agent's store and its workers' pipes must not take the numbers of
  // closed standard streams, where its own messages would go into them.
  ddp::core::keep_standard_streams_open();
  std::vector<std::string> args(argv + 1, argv + argc);
  for (auto& s : args)
    if (s == "-h" || s == "--help") {
      std::cout << ddprun::ddprun_usage();
      return 0;
    }
  ddprun::DdprunArgs a;
  try {
    a = ddprun::parse_ddprun_args(args);
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 2;
  }
  try {
    return ddprun::run_agent(std::move(a));
  } catch (const std::exception& e) {
    std::cerr << "ddprun: " << e.what() << "\n";
    return 1;
  }
}
