#include "debug/flight_analysis.h"

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "common/regular_file.h"

namespace ddp::core::flight {
namespace {

[[noreturn]] void malformed(const std::string& name, int line, const std::string& why) {
  throw std::runtime_error(name + ":" + std::to_string(line) + ": not a flight record (" + why + ")");
}

int64_t time_field(const std::string& s) { return s == "-" ? 0 : std::stoll(s); }

// Ops whose sizes may differ between ranks by design: the uneven gather
// (any shape) and the byte broadcast (the length is known on src only).
bool sizes_may_differ(const std::string& op) { return op == "all_gather_uneven" || op == "broadcast_bytes"; }

bool finished_well(const Entry& e) { return e.state == "completed"; }

std::string seconds_between(int64_t from_us, int64_t to_us) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.1f s", double(to_us - from_us) / 1e6);
  return b;
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? (i + 1 == ranks.size() ? " and " : ", ") : "") + std::to_string(ranks[i]);
  return s;
}

struct GroupView {
  std::map<int, std::map<int64_t, const Entry*>> by_rank;  // rank -> seq -> entry
};

// The first collective that ranks of one group called differently (its
// number in *at).
std::string first_disagreement(const std::string& label, const GroupView& g, int64_t* at) {
  std::set<int64_t> seqs;
  for (auto& [rank, m] : g.by_rank)
    for (auto& [seq, e] : m) seqs.insert(seq);
  for (int64_t seq : seqs) {
    std::map<std::string, std::vector<int>> calls;  // what was called -> who
    std::map<std::string, const Entry*> sample;
    for (auto& [rank, m] : g.by_rank) {
      auto it = m.find(seq);
      if (it == m.end()) continue;
      const Entry& e = *it->second;
      std::string key = e.op + "|" + e.reduce + "|" + e.dtype + "|" + std::to_string(e.root);
      if (!sizes_may_differ(e.op)) key += "|" + e.shape;
      calls[key].push_back(rank);
      sample[key] = &e;
    }
    if (calls.size() < 2) continue;
    *at = seq;
    std::string s = "the ranks first disagree in group " + label + " at collective #" + std::to_string(seq) + ":";
    for (auto& [key, ranks] : calls) {
      const Entry& e = *sample[key];
      s += " " + ranks_text(ranks) + " called " + describe(e).substr(describe(e).find(' ') + 1) + " (" + e.state + ");";
    }
    s.back() = '.';
    return s;
  }
  return "";
}

// `disagreed_at`: where the ranks called different things (0: nowhere); not
// finishing that call needs no second line.
void behind_findings(const std::string& label, const GroupView& g, int64_t disagreed_at, std::vector<std::string>& out) {
  std::map<int, const Entry*> last;
  for (auto& [rank, m] : g.by_rank)
    if (!m.empty()) last[rank] = m.rbegin()->second;
  if (last.empty()) return;
  int64_t most = INT64_MIN, least = INT64_MAX;
  for (auto& [rank, e] : last) {
    most = std::max(most, e->seq);
    least = std::min(least, e->seq);
  }
  if (most != least) {
    std::vector<int> leaders;
    for (auto& [rank, e] : last)
      if (e->seq == most) leaders.push_back(rank);
    const Entry& lead = *last[leaders.front()];
    for (auto& [rank, e] : last) {
      if (e->seq == most) continue;
      std::string s = "rank " + std::to_string(rank) + " is behind in group " + label + ": its last collective is " +
                      describe(*e) + " (" + e->state + "), ";
      auto next = g.by_rank.at(leaders.front()).find(e->seq + 1);
      if (next != g.by_rank.at(leaders.front()).end())
        s += "it never called " + describe(*next->second) + ", which " + ranks_text(leaders) + " reached";
      else
        s += ranks_text(leaders) + " reached " + describe(lead);
      s += " (" + lead.state + ")";
      out.push_back(s);
    }
    return;
  }
  // Every rank called the same last collective: who did not finish it, and
  // who arrived late.
  const Entry* earliest = nullptr;
  for (auto& [rank, e] : last)
    if (!earliest || e->enqueued_us < earliest->enqueued_us) earliest = e;
  std::vector<int> unfinished;
  for (auto& [rank, e] : last)
    if (!finished_well(*e)) unfinished.push_back(rank);
  if (!unfinished.empty() && earliest->seq != disagreed_at) {
    std::string s = "in group " + label + " " + ranks_text(unfinished) + " did not finish " + describe(*earliest) + ":";
    for (int r : unfinished) s += " rank " + std::to_string(r) + " " + last[r]->state + ";";
    s.back() = '.';
    out.push_back(s);
  }
  for (auto& [rank, e] : last) {
    if (e == earliest || !e->enqueued_us || !earliest->enqueued_us) continue;
    if (e->enqueued_us - earliest->enqueued_us >= 1000000)
      out.push_back("rank " + std::to_string(rank) + " called " + describe(*e) + " in group " + label + " " +
                    seconds_between(earliest->enqueued_us, e->enqueued_us) + " after the first rank did");
  }
}

}  // namespace

RankRecord parse_record(const std::string& text, const std::string& name) {
  RankRecord r;
  r.file = name;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  bool header = false, ended = false;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string key;
    f >> key;
    try {
      if (n == 1) {
        int version = 0;
        f >> version;
        if (key != "libddp-flight-recorder" || version != 1) malformed(name, n, "no libddp-flight-recorder 1 header");
        header = true;
      } else if (key == "rank") {
        f >> r.rank;
      } else if (key == "world") {
        f >> r.world;
      } else if (key == "pid") {
        f >> r.pid;
      } else if (key == "host") {
        f >> r.host;
      } else if (key == "dumped_us") {
        f >> r.dumped_us;
      } else if (key == "reason") {
        std::getline(f >> std::ws, r.reason);
      } else if (key == "entry") {
        Entry e;
        std::string numel, root, t0, t1, t2;
        f >> e.label >> e.seq >> e.op >> e.reduce >> e.dtype >> numel >> e.shape >> root >> e.state >> t0 >> t1 >> t2;
        if (!f) malformed(name, n, "an entry needs 12 fields");
        // Numbered from 1 by the recorder; the bound keeps seq + 1 defined.
        if (e.seq < 1 || e.seq == INT64_MAX) malformed(name, n, "a sequence number out of range");
        e.numel = std::stoll(numel);
        e.root = std::stoi(root);
        e.enqueued_us = time_field(t0);
        e.waiting_us = time_field(t1);
        e.finished_us = time_field(t2);
        r.entries.push_back(std::move(e));
      } else if (key == "end") {
        ended = true;
      } else {
        malformed(name, n, "unknown line '" + key + "'");
      }
    } catch (const std::invalid_argument&) {
      malformed(name, n, "a field is not a number");
    } catch (const std::out_of_range&) {
      malformed(name, n, "a number is out of range");
    }
    if (!f && key != "entry" && key != "end" && key != "reason" && n != 1) malformed(name, n, "missing value");
  }
  if (!header) malformed(name, 1, "no libddp-flight-recorder 1 header");
  if (!ended) malformed(name, n, "it ends early (no 'end' line)");
  if (r.rank < 0 || r.world <= r.rank) malformed(name, n, "rank or world missing or out of range");
  return r;
}

RankRecord read_record(const std::string& path) {
  std::string why, text;
  if (!read_regular_file(path, &text, &why))  // not a FIFO, which would block the read
    throw std::runtime_error(path + ": cannot be read: " + why);
  return parse_record(text, path);
}

std::vector<std::string> files_with_prefix(const std::string& prefix) {
  auto slash = prefix.rfind('/');
  std::string dir = slash == std::string::npos ? "." : prefix.substr(0, slash == 0 ? 1 : slash);
  std::string base = slash == std::string::npos ? prefix : prefix.substr(slash + 1);
  std::vector<std::pair<long, std::string>> found;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* de = readdir(d)) {
      std::string name = de->d_name;
      if (name.size() <= base.size() || name.compare(0, base.size(), base) != 0) continue;
      std::string rest = name.substr(base.size());
      if (rest.size() > 9 || rest.find_first_not_of("0123456789") != std::string::npos) continue;
      found.emplace_back(std::stol(rest), (dir == "/" ? "" : dir) + "/" + name);
    }
    closedir(d);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

std::string describe(const Entry& e) {
  std::string s = "#" + std::to_string(e.seq) + " " + e.op;
  if (e.reduce != "-") s += "(" + e.reduce + ")";
  if (e.dtype != "-") s += " " + e.dtype + (e.shape == "-" ? "" : e.shape);
  if (e.root >= 0) s += " root " + std::to_string(e.root);
  return s;
}

std::vector<std::string> verdict(const std::vector<RankRecord>& records) {
  std::vector<std::string> out;
  if (records.empty()) return {"no flight records to compare"};
  int world = 0;
  std::map<int, const RankRecord*> by_rank;
  for (auto& r : records) {
    world = std::max(world, r.world);
    by_rank[r.rank] = &r;
  }
  // The ranks without a record: named up to a few, counted beyond (a record
  // may claim any world size; found by fuzzing, a claim of 30 million ranks
  // once took seconds to list).
  constexpr size_t kNamedSilent = 16;
  std::vector<int> silent;
  int64_t silent_count = world - static_cast<int64_t>(by_rank.size());
  for (int r = 0; r < world && silent.size() < kNamedSilent && silent_count > 0; ++r)
    if (!by_rank.count(r)) silent.push_back(r);

  std::map<std::string, GroupView> groups;
  for (auto& [rank, rec] : by_rank)
    for (auto& e : rec->entries) groups[e.label].by_rank[rank][e.seq] = &e;

  std::vector<std::string> disagreements, behind;
  for (auto& [label, g] : groups) {
    int64_t at = 0;
    std::string d = first_disagreement(label, g, &at);
    if (!d.empty()) disagreements.push_back(d);
    behind_findings(label, g, at, behind);
  }
  out.insert(out.end(), disagreements.begin(), disagreements.end());
  out.insert(out.end(), behind.begin(), behind.end());
  if (!silent.empty()) {
    std::string s = ranks_text(silent) +
                    (silent_count > static_cast<int64_t>(silent.size())
                         ? " and " + std::to_string(silent_count - static_cast<int64_t>(silent.size())) + " more"
                         : "") +
                    " left no flight record (killed, stopped, or never failed)";
    // What the ranks that did write were waiting for: likely on them.
    for (auto& [label, g] : groups) {
      for (auto& [rank, m] : g.by_rank) {
        if (m.empty() || finished_well(*m.rbegin()->second)) continue;
        s += "; rank " + std::to_string(rank) + " was in " + describe(*m.rbegin()->second) + " of group " + label +
             " (" + m.rbegin()->second->state + ")";
      }
    }
    out.push_back(s);
  }
  for (auto& [rank, rec] : by_rank)
    out.push_back("rank " + std::to_string(rank) + " (pid " + std::to_string(rec->pid) + " on " + rec->host +
                  ") dumped: " + rec->reason);
  if (disagreements.empty() && behind.empty() && silent.empty())
    out.insert(out.begin(), "the ranks agree: every rank called the same collectives, in the same order");
  return out;
}

}  // namespace ddp::core::flight
