#include "flight.h"

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <vector>

#include "debug/flight_analysis.h"

namespace ddprun {

FlightRecords::FlightRecords() {
  const char* user = std::getenv("DDP_FLIGHT_RECORDER_FILE");
  if (user && *user) {
    prefix_ = user;
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/ddprun-flight-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  // Without a directory of its own the workers fall back to their default
  // prefix, and the verdict is not printed: nothing else depends on it.
  if (mkdtemp(buf.data())) {
    private_dir_ = buf.data();
    prefix_ = private_dir_ + "/rank_";
  }
}

FlightRecords::~FlightRecords() {
  if (private_dir_.empty()) return;
  for (auto& f : ddp::core::flight::files_with_prefix(prefix_)) unlink(f.c_str());
  unlink((prefix_ + ".tmp").c_str());
  rmdir(private_dir_.c_str());
}

void FlightRecords::clear(int first_rank, int count) const {
  if (!private_dir_.empty()) {  // everything in it is an earlier round's
    for (auto& f : ddp::core::flight::files_with_prefix(prefix_)) unlink(f.c_str());
    return;
  }
  for (int r = first_rank; r < first_rank + count && !prefix_.empty(); ++r)
    unlink((prefix_ + std::to_string(r)).c_str());
}

void FlightRecords::print_verdict(std::ostream& out) const {
  using namespace ddp::core::flight;
  if (prefix_.empty()) return;
  std::vector<RankRecord> records;
  for (auto& f : files_with_prefix(prefix_)) {
    try {
      records.push_back(read_record(f));
    } catch (const std::exception& e) {
      out << "ddprun: flight recorder: " << e.what() << "\n";
    }
  }
  if (records.empty()) return;
  out << "ddprun: flight recorder, from " << records.size() << " rank(s) of this node:\n";
  for (auto& line : verdict(records)) out << "  " << line << "\n";
}

}  // namespace ddprun
