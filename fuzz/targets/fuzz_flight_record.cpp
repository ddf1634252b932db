// Flight recorder dumps, as ddprun and ddp_flight read them from files any
// rank (or anything else) may have written: parse_record returns a record or
// throws std::runtime_error; the verdict on any records never fails.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "debug/flight_analysis.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddp::core::flight;
  std::string in(reinterpret_cast<const char*>(data), size);
  // Two records: the input split at its first "\n==\n" (else the input twice).
  auto sep = in.find("\n==\n");
  std::vector<std::string> texts = {in.substr(0, sep), sep == std::string::npos ? in : in.substr(sep + 4)};
  std::vector<RankRecord> records;
  for (size_t i = 0; i < texts.size(); ++i) {
    try {
      records.push_back(parse_record(texts[i], "fuzz" + std::to_string(i)));
    } catch (const std::runtime_error&) {
    }
  }
  verdict(records);
  return 0;
}
