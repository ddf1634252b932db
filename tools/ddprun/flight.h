// Where this node's workers write their flight recorder dumps
// (core/debug/flight_recorder.h), and the verdict ddprun prints from them
// after a failed round.
#pragma once

#include <ostream>
#include <string>

namespace ddprun {

class FlightRecords {
 public:
  // The user's DDP_FLIGHT_RECORDER_FILE (kept afterwards), else a private
  // temporary directory that is removed with this object.
  FlightRecords();
  ~FlightRecords();
  FlightRecords(const FlightRecords&) = delete;
  FlightRecords& operator=(const FlightRecords&) = delete;

  // What the workers are given as DDP_FLIGHT_RECORDER_FILE.
  const std::string& prefix() const { return prefix_; }
  // Before a round: an earlier round's (or job's) dumps of these ranks would
  // be read as this round's.
  void clear(int first_rank, int count) const;
  // The verdict on the dumps this node's workers left; nothing when none did.
  void print_verdict(std::ostream& out) const;

 private:
  std::string prefix_;
  std::string private_dir_;  // empty when the user chose the prefix
};

}  // namespace ddprun
