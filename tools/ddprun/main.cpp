// ddprun: launches and supervises the workers of a DDP job, with torchrun's
// flags and worker environment. Exit codes: 0 success, 1 a failed job, 2 a
// usage error, 128+signal when stopped.
#include <iostream>
#include <string>
#include <vector>

#include "agent.h"
#include "args.h"

int main(int argc, char** argv) {
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
