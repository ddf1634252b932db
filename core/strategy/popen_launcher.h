// Lightning's subprocess script launcher (the DDP strategy's default start
// method): this process becomes local rank 0 and starts the program again,
// with the same arguments, for local ranks 1..N-1, each with the worker
// environment of a launcher (launch/worker_env.h). There, the strategy finds
// that environment and launches nothing. A thread of this process supervises
// the others (launch/supervisor.h): a failing rank ends the rest, and they
// die with this process.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "comm/group.h"
#include "env/cluster_env.h"
#include "launch/supervisor.h"

namespace ddp::core {

class PopenLauncher {
 public:
  PopenLauncher() = default;
  PopenLauncher(const PopenLauncher&) = delete;
  PopenLauncher& operator=(const PopenLauncher&) = delete;
  // Ends the other ranks if finish() was not called.
  ~PopenLauncher();

  // Binds the rendezvous port on `master_addr`, starts local ranks
  // 1..nprocs-1, and returns the environment of this process (rank 0).
  // Exports what this process's group needs (the job id, the bound socket);
  // finish() takes it back.
  ClusterEnv launch(int nprocs, const std::string& master_addr, Millis grace);

  // While this process waits for the group's rendezvous: which rank this
  // process started has ended and how ("rank 1 (pid 42) ended with exit
  // code 3"), as such a rank will never arrive; nothing while all run.
  std::optional<std::string> ended_rank();

  // After a collective failed: waits up to `wait` for the ranks this process
  // started to have ended, and says which failed first ("" when none did).
  std::string failed_rank(Millis wait);

  // Waits up to `timeout` for the other ranks to end, then ends the rest.
  // Throws Status::WorkerFailed naming the first that failed.
  void finish(Millis timeout);

 private:
  void export_var(const std::string& name, const std::string& value);
  void restore_exported();
  void note_ended(const std::vector<launch::ChildStatus>& children);

  std::thread supervisor_;
  std::atomic<int> stop_{0};
  std::atomic<bool> done_{false};
  launch::JobResult result_;
  std::string start_error_;
  mutable std::mutex ended_m_;
  std::optional<std::string> ended_;  // the first rank seen ended, as ended_rank() says it
  std::vector<std::pair<std::string, std::optional<std::string>>> exported_;  // name, previous value
};

}  // namespace ddp::core
