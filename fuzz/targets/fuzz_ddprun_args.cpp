// ddprun's command line (torchrun's flags). Input: arguments separated by
// newlines. parse_ddprun_args must return arguments worker_argv can use, or
// throw ddp::core::Error naming the bad flag; nothing else.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "args.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> argv{"ddprun"};
  size_t at = 0;
  while (at <= in.size()) {
    size_t end = in.find('\n', at);
    if (end == std::string::npos) end = in.size();
    argv.push_back(in.substr(at, end - at));
    at = end + 1;
  }
  try {
    ddprun::DdprunArgs a = ddprun::parse_ddprun_args(argv);
    if (a.nproc_per_node < 1 || a.min_nodes < 1 || a.max_nodes < a.min_nodes || a.master_port < 0 ||
        a.master_port > 65535 || a.command.empty())
      std::abort();  // accepted arguments no launch could use
    ddprun::worker_argv(a);
  } catch (const ddp::core::Error&) {
  }
  return 0;
}
