#include "launch/spawn.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "common/error.h"
#include "launch/worker_env.h"

namespace ddp::core::launch {
namespace {

// Which ddp_spawn call of the program this is. A popen worker re-runs the
// program from main(); the call whose index matches DDP_SPAWN_CALL runs the
// worker body, earlier calls return at once.
std::atomic<int> g_calls{0};

// Whether this process runs a worker body now (popen or fork): a ddp_spawn
// from inside it starts a job of its own, and cannot use popen (below).
std::atomic<bool> g_in_worker_body{false};

constexpr const char* kCallVar = "DDP_SPAWN_CALL";
constexpr const char* kDirVar = "DDP_SPAWN_DIR";
// The pid of the process whose ddp_spawn started the worker. The variables
// are inherited by whatever a worker starts (a `system()` of another
// libddp program, a helper that spawns a job of its own): without this
// such a program took itself for a worker of the outer job, ran its body
// with the outer job's rank and files, and never ran its own job.
constexpr const char* kParentVar = "DDP_SPAWN_PARENT";

// A whole non-negative base-10 integer, or -1.
long long whole_number(const char* s) {
  if (!s || *s < '0' || *s > '9') return -1;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  return errno == 0 && *end == '\0' ? v : -1;
}

// The ddp_spawn call this process is a popen worker of, or -1: the
// variables count only in the process the call's own launch started (its
// parent is the caller; a worker dies with it, PR_SET_PDEATHSIG), and
// not inside a worker body (a nested call is a job of its own).
long long popen_worker_of_call() {
  if (g_in_worker_body.load()) return -1;
  const long long parent = whole_number(std::getenv(kParentVar));
  if (parent <= 0 || parent != static_cast<long long>(getppid())) return -1;
  return whole_number(std::getenv(kCallVar));
}

// A worker variable's value, which the launch set: a message naming it
// where the program changed it since.
int worker_var(const char* name) {
  const long long v = whole_number(std::getenv(name));
  if (v < 0 || v > 1 << 20)
    fail(Status::State, std::string("ddp_spawn worker: ") + name + " is " +
                            (std::getenv(name) ? "'" + std::string(std::getenv(name)) + "'" : "not set") +
                            ", which the launch set for the worker; the program changed it before this call");
  return static_cast<int>(v);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& data) {
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(Status::IO, "cannot write " + tmp + ": " + std::strerror(errno));
  int err = 0;  // the first failure's errno: what fclose and unlink do after it must not hide it
  auto step = [&err](bool done) {
    if (!done && err == 0) err = errno ? errno : EIO;
  };
  step(data.empty() || std::fwrite(data.data(), 1, data.size(), f) == data.size());
  step(std::fflush(f) == 0);
  step(fsync(fileno(f)) == 0);
  step(std::fclose(f) == 0);
  if (err == 0) step(std::rename(tmp.c_str(), path.c_str()) == 0);
  if (err != 0) {
    std::remove(tmp.c_str());  // else the caller's directory could not be removed after it
    fail(Status::IO, "cannot write " + path + ": " + std::strerror(err));
  }
}

// The parent's environment with the worker's rendezvous variables on top.
// One host, rank 0 hosting the store on the socket bound here (a launcher
// above us, ddprun or torchrun, told its own workers to use its store; ours
// do not).
std::vector<std::string> spawn_worker_env(const SpawnOptions& o, int rank, int port, int listen_fd, int call,
                                          const std::string& dir, const std::string& job_id) {
  WorkerPlace w;
  w.rank = w.local_rank = rank;
  w.world_size = w.local_world_size = o.nprocs;
  w.master_addr = o.master_addr;
  w.master_port = port;
  w.job_id = job_id;
  std::vector<std::pair<std::string, std::string>> extra = {
      {kCallVar, std::to_string(call)}, {kDirVar, dir}, {kParentVar, std::to_string(getpid())}};
  if (rank == 0) extra.push_back({"DDP_MASTER_LISTEN_FD", std::to_string(listen_fd)});
  return worker_env(w, extra);
}

// Where a popen worker says it reached its call (ChildSpec::reached_file):
// a worker whose main ended before the call ran nothing, and its exit code
// 0 is no success.
std::string reached_file(const std::string& dir, int rank) { return dir + "/reached." + std::to_string(rank); }

void mark_reached(const std::string& dir, int rank) {
  const std::string path = reached_file(dir, rank);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) fail(Status::IO, "cannot write " + path + ": " + std::strerror(errno));
  close(fd);
}

[[noreturn]] void run_worker_and_exit(const WorkerBody& body, const std::string& dir) {
  g_in_worker_body = true;
  WorkerContext ctx;
  int rc = 1;
  try {
    ctx.rank = worker_var("RANK");
    ctx.world_size = worker_var("WORLD_SIZE");
    ctx.local_rank = worker_var("LOCAL_RANK");
    if (dir.empty())
      fail(Status::State, "ddp_spawn worker: DDP_SPAWN_DIR is not set, which the launch set for the worker; the "
                          "program changed it before this call");
    mark_reached(dir, ctx.rank);
    auto arg = read_file(dir + "/arg.bin");
    rc = body(ctx, arg);
    if (ctx.rank == 0 && ctx.has_result) write_file_atomically(dir + "/result.bin", ctx.result);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[rank %d] worker failed: %s\n", ctx.rank, e.what());
    rc = rc ? rc : 1;
  }
  std::fflush(nullptr);
  // _exit: no static destructors while backend threads may still run.
  _exit(rc);
}

void remove_dir(const std::string& dir, int nprocs) {
  for (const char* f : {"/arg.bin", "/result.bin", "/result.bin.tmp"}) unlink((dir + f).c_str());
  for (int r = 0; r < nprocs; ++r) unlink(reached_file(dir, r).c_str());
  rmdir(dir.c_str());
}

std::string joined(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace

SpawnOutcome spawn(const SpawnOptions& o, const WorkerBody& body, const void* arg, size_t arg_len) {
  int call = g_calls.fetch_add(1);
  if (const long long target = popen_worker_of_call(); target >= 0) {
    if (call == target) run_worker_and_exit(body, std::getenv(kDirVar) ? std::getenv(kDirVar) : "");
    SpawnOutcome skipped;
    skipped.ran_here = false;
    return skipped;
  }
  // A popen worker runs the program's main again, and main does not reach
  // a call made inside a worker body: the nested job's workers would skip
  // to the end of main and "succeed" without running anything.
  if (g_in_worker_body.load() && o.method == StartMethod::Popen)
    fail(Status::State,
         "ddp_spawn inside a worker of ddp_spawn: with DDP_START_POPEN its workers would run the "
         "program's main again, which never reaches a call made inside a worker; start the nested job "
         "with DDP_START_FORK, or from main");
  check_arg(o.nprocs >= 1 && o.nprocs <= 4096, "nprocs " + std::to_string(o.nprocs) + " is outside [1, 4096]");
  check_arg(arg != nullptr || arg_len == 0, "arg is NULL with arg_len " + std::to_string(arg_len));
  check_arg(o.master_port >= 0 && o.master_port <= 65535,
            "master_port " + std::to_string(o.master_port) + " is outside [0, 65535]");
  check_arg(o.timeout.count() >= 0 && o.timeout <= kMaxJobTimeout,
            "timeout " + std::to_string(o.timeout.count()) + " ms is outside [0, " +
                std::to_string(kMaxJobTimeout.count()) + "] (0: none; the most is about 95 years)");
  check_arg(o.grace.count() >= 0 && o.grace <= kMaxTimeout, "grace " + std::to_string(o.grace.count()) +
                                                              " ms is outside [0, " + std::to_string(kMaxTimeout.count()) + "]");
  if (o.method == StartMethod::Fork) {
    int threads = thread_count();
    if (threads != 1)
      fail(Status::State, "start method fork: this process has " + std::to_string(threads) +
                            " threads, and a forked child inherits locks held by them; use "
                            "DDP_START_POPEN (the default)");
  }

  // The call's directory (the argument and rank 0's result) where the
  // program keeps its temporary files: ${TMPDIR:-/tmp}, as the flight
  // recorder and Python's tempfile choose.
  const char* tmpdir = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/ddp-spawn-XXXXXX";
  if (!mkdtemp(tmpl.data()))
    fail(Status::IO, "cannot make the call's directory " + tmpl + " (TMPDIR): " + std::strerror(errno));
  std::string dir = tmpl;
  std::vector<uint8_t> arg_bytes(static_cast<const uint8_t*>(arg),
                                 static_cast<const uint8_t*>(arg) + arg_len);
  int port = 0, listen_fd = -1;
  const std::string job_id = random_job_id();
  try {
    write_file_atomically(dir + "/arg.bin", arg_bytes);
    listen_fd = listen_socket(o.master_addr, o.master_port, &port);
  } catch (...) {
    remove_dir(dir, o.nprocs);
    throw;
  }

  std::vector<ChildSpec> children;
  auto argv = own_command_line();
  std::string exe = own_executable();
  for (int r = 0; r < o.nprocs; ++r) {
    ChildSpec c;
    c.rank = r;
    c.env = spawn_worker_env(o, r, port, listen_fd, call, dir, job_id);
    if (r == 0) c.keep_fds.push_back(listen_fd);
    // As Python's multiprocessing gives its workers (and so Lightning's
    // spawn strategy): the program's input is the program's, and a worker
    // that runs an interpreter's prompt again ends at once instead of
    // reading the terminal.
    c.stdin_from_null = true;
    if (o.method == StartMethod::Popen) {
      // The same binary, whatever argv[0] says; argv[0] itself is kept, as
      // interpreters find their environment from it (a Python venv's
      // bin/python is a link to the base interpreter).
      c.argv = argv;
      if (c.argv.empty()) c.argv.push_back(exe);
      c.exe = exe;
      c.cwd = program_start_dir();
      c.reached_file = reached_file(dir, r);
    } else {
      c.body = [&body, &arg_bytes, &dir, r, listen_fd, nprocs = o.nprocs]() -> int {
        if (r != 0) close(listen_fd);
        g_in_worker_body = true;
        WorkerContext ctx;
        ctx.rank = ctx.local_rank = r;  // what the child's RANK and LOCAL_RANK say: one host
        ctx.world_size = nprocs;
        int rc = body(ctx, arg_bytes);
        if (ctx.rank == 0 && ctx.has_result) write_file_atomically(dir + "/result.bin", ctx.result);
        return rc;
      };
    }
    children.push_back(std::move(c));
  }

  SupervisorOptions so;
  so.grace = o.grace;
  so.job_timeout = o.timeout;
  JobResult job;
  try {
    job = run_job(children, so);
  } catch (...) {
    close(listen_fd);
    remove_dir(dir, o.nprocs);
    throw;
  }
  close(listen_fd);
  SpawnOutcome out;
  if (job.ok()) {
    std::ifstream f(dir + "/result.bin", std::ios::binary);
    if (f) out.rank0_result = read_file(dir + "/result.bin");
  }
  remove_dir(dir, o.nprocs);
  if (job.timed_out)
    fail(Status::Timeout, "ddp_spawn: the job ran past its " + std::to_string(o.timeout.count()) +
                            " ms timeout. " + job.summary());
  if (!job.ok()) {
    std::string why = "ddp_spawn: " + job.summary();
    for (const auto& c : job.children)
      if (c.never_reached) {
        why += " Rank " + std::to_string(c.rank) + " ran the program again (" + joined(argv) +
               ") and its main ended before this ddp_spawn call: a popen worker must reach the same call, which "
               "a program read from standard input or typed at an interpreter's prompt cannot; run it from a "
               "file, or use DDP_START_FORK";
        break;
      }
    fail(Status::WorkerFailed, why);
  }
  return out;
}

}  // namespace ddp::core::launch
