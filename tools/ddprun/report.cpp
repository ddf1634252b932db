#include "report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/regular_file.h"
#include "common/temporary_name.h"

namespace ddprun {
using namespace ddp::core::launch;
namespace {

std::string hostname() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string now_iso() {
  char buf[64];
  std::time_t t = std::time(nullptr);
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

}  // namespace

std::vector<Failure> failures_of(const JobResult& job, const DdprunArgs& a) {
  std::vector<Failure> out;
  auto add = [&](size_t i) {
    const auto& c = job.children[i];
    out.push_back({c.rank, c.rank - a.node_rank * a.nproc_per_node, a.node_rank, c, now_iso()});
  };
  if (job.first_failure >= 0) add(static_cast<size_t>(job.first_failure));
  for (size_t i = 0; i < job.children.size(); ++i)
    if (static_cast<int>(i) != job.first_failure && job.children[i].ended && !job.children[i].ok() &&
        !job.children[i].stopped_by_us)
      add(i);
  return out;
}

void print_failure_summary(const std::vector<Failure>& failures, const std::string& prog, int restarts) {
  std::ostringstream o;
  o << "============================================================\n"
    << prog << " FAILED (restarts used: " << restarts << ")\n"
    << "------------------------------------------------------------\n";
  for (size_t i = 0; i < failures.size(); ++i) {
    const auto& f = failures[i];
    o << (i == 0 ? "Root Cause (first observed failure):\n" : (i == 1 ? "Other failures:\n" : ""))
      << "[" << i << "]:\n"
      << "  time      : " << f.time << "\n"
      << "  host      : " << hostname() << "\n"
      << "  rank      : " << f.rank << " (local_rank: " << f.local_rank << ", node: " << f.node << ")\n"
      << "  exitcode  : " << (f.status.signal ? -f.status.signal : f.status.exit_code) << " (pid: " << f.status.pid
      << ")\n"
      << "  error     : " << (f.status.signal ? "signal " + std::to_string(f.status.signal) + " (" +
                                                    signal_name(f.status.signal) + ")"
                                              : "exit code " + std::to_string(f.status.exit_code))
      << "\n";
  }
  o << "============================================================\n";
  std::cerr << o.str() << std::flush;
}

void write_error_file(const std::string& path, const std::vector<Failure>& failures, int restarts,
                      const std::string& message) {
  if (path.empty()) return;
  std::ostringstream o;
  o << "{\"message\": \"" << json_escape(message) << "\", \"restart_count\": " << restarts << ", \"failures\": [";
  for (size_t i = 0; i < failures.size(); ++i) {
    const auto& f = failures[i];
    o << (i ? ", " : "") << "{\"rank\": " << f.rank << ", \"local_rank\": " << f.local_rank
      << ", \"node_rank\": " << f.node << ", \"host\": \"" << json_escape(hostname()) << "\", \"pid\": "
      << f.status.pid << ", \"exitcode\": " << (f.status.signal ? -f.status.signal : f.status.exit_code)
      << ", \"signal\": " << (f.status.signal ? "\"" + signal_name(f.status.signal) + "\"" : "null")
      << ", \"time\": \"" << f.time << "\", \"root_cause\": " << (i == 0 ? "true" : "false") << "}";
  }
  o << "]}\n";
  std::string what;
  const std::string target = ddp::core::file_to_replace(path, &what);
  if (target.empty()) {
    // A device or FIFO (/dev/null, /dev/stderr) is written into, as
    // torchrun does; renaming onto it would replace it (as root, /dev/null
    // itself). Not blocking: a FIFO nobody reads is ENXIO, not a wait. A
    // directory or socket fails the open (EISDIR, ENXIO).
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    const std::string text = o.str();
    bool written = fd >= 0;
    for (size_t done = 0; written && done < text.size();) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      written = n > 0;
      if (written) done += static_cast<size_t>(n);
    }
    if (fd >= 0) ::close(fd);
    if (!written) std::cerr << "ddprun: cannot write the error file " << path << " (" << what << ")\n";
    return;
  }
  const std::string tmp = ddp::core::temporary_beside(target, ".tmp");
  std::ofstream f(tmp);
  f << o.str();
  f.close();
  if (!f || std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::remove(tmp.c_str());  // a half-written file (a full disk) is nobody's report
    std::cerr << "ddprun: cannot write the error file " << path << "\n";
  }
}

}  // namespace ddprun
