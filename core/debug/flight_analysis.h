// Reads the flight recorder's dumps of every rank (flight_recorder.h) and
// says what went wrong: which rank is behind and on which collective, and
// where the ranks first called different things. Used by ddprun after a
// failed round and by the ddp_flight tool for files gathered by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ddp::core::flight {

struct Entry {
  std::string label;  // the group, named the same on every rank
  int64_t seq = 0;    // that group's collectives, counted from 1
  std::string op, reduce, dtype, shape, state;
  int64_t numel = -1;
  int root = -1;
  int64_t enqueued_us = 0, waiting_us = 0, finished_us = 0;  // 0: never
};

struct RankRecord {
  std::string file;
  int rank = -1, world = 0;
  int64_t pid = 0, dumped_us = 0;
  std::string host, reason;
  std::vector<Entry> entries;  // oldest first
};

// Throws std::runtime_error naming `name` and the line for a malformed dump.
RankRecord parse_record(const std::string& text, const std::string& name);
RankRecord read_record(const std::string& path);

// The dump files <prefix><rank> that exist (temporary files left out),
// ordered by rank.
std::vector<std::string> files_with_prefix(const std::string& prefix);

// "#12 all_reduce(sum) Float[4]" and the like.
std::string describe(const Entry& e);

// The verdict, one finding per line, the most telling first. Records of
// different jobs or restarts mixed together make no sense to compare: the
// caller passes one job's.
std::vector<std::string> verdict(const std::vector<RankRecord>& records);

}  // namespace ddp::core::flight
