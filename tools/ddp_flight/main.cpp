// ddp_flight: the verdict on flight recorder dumps gathered by hand.
//   ddp_flight [--prefix PREFIX] [FILE...]
// Without files, reads PREFIX<rank> for every rank found (default prefix:
// $DDP_FLIGHT_RECORDER_FILE, else ${TMPDIR:-/tmp}/libddp_flight_rank_).
// Exit status: 0 with a verdict, 2 when no record could be read.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "debug/flight_analysis.h"

namespace {

std::string default_prefix() {
  const char* f = std::getenv("DDP_FLIGHT_RECORDER_FILE");
  if (f && *f) return f;
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/libddp_flight_rank_";
}

int usage() {
  std::fprintf(stderr, "usage: ddp_flight [--prefix PREFIX] [FILE...]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddp::core::flight;
  std::string prefix;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--prefix") {
      if (++i >= argc) return usage();
      prefix = argv[i];
    } else if (a == "-h" || a == "--help") {
      usage();
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "ddp_flight: unknown option '%s'\n", a.c_str());
      return usage();
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) files = files_with_prefix(prefix.empty() ? default_prefix() : prefix);
  if (files.empty()) {
    std::fprintf(stderr, "ddp_flight: no flight records at %s<rank>\n",
                 (prefix.empty() ? default_prefix() : prefix).c_str());
    return 2;
  }
  std::vector<RankRecord> records;
  for (auto& f : files) {
    try {
      records.push_back(read_record(f));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddp_flight: %s\n", e.what());
    }
  }
  if (records.empty()) return 2;
  for (auto& line : verdict(records)) std::printf("%s\n", line.c_str());
  return 0;
}
