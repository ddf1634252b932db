// Threads racing through the LibTorch-free concurrent parts, under
// ThreadSanitizer (scripts/test_tsan.sh): exits 0 when every check held; a
// data race makes TSan fail the run.
//  1. the flight recorder: writers record, mark and finish entries while
//     another thread dumps, as a hook thread and a timeout would;
//  2. the store server: clients set, get, add and wait on each other's keys
//     from threads of their own, as ranks and agents do.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "debug/flight_analysis.h"
#include "debug/flight_recorder.h"
#include "common/error.h"
#include "launch/supervisor.h"
#include "store/wire_client.h"
#include "store/wire_server.h"

namespace {

int failures = 0;
#define CHECK(c)                                                      \
  do {                                                                \
    if (!(c)) {                                                       \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); \
      ++failures;                                                     \
    }                                                                 \
  } while (0)

void flight_recorder_race(const std::string& dir) {
  using namespace ddp::core::flight;
  setenv("DDP_FLIGHT_RECORDER_FILE", (dir + "/rank_").c_str(), 1);
  setenv("DDP_FLIGHT_RECORDER_ENTRIES", "64", 1);  // small: writers lap the dumper
  configure(0, 1);
  const char* label = intern_label("g0");
  std::atomic<int64_t> seq{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w)
    writers.emplace_back([&] {
      Call c;
      c.op = "all_reduce";
      c.reduce = "sum";
      c.dtype = "Float";
      c.numel = 4;
      c.ndim = 1;
      c.dims[0] = 4;
      for (int i = 0; i < 20000; ++i) {
        Ticket t = record(label, ++seq, c);
        waiting(t);
        finish(t, State::Completed);
      }
    });
  int dumps = 0;
  std::thread dumper([&] {
    while (!stop) dumps += dump("tsan stress") ? 1 : 0;
  });
  for (auto& t : writers) t.join();
  stop = true;
  dumper.join();
  CHECK(dumps > 0);
  CHECK(dump("final"));
  auto r = read_record(dir + "/rank_0");
  CHECK(r.entries.size() == 64);
  CHECK(r.entries.back().seq == 80000);
}

void store_race() {
  using namespace ddp::core;
  int port = 0;
  WireStoreServer server(launch::listen_socket("127.0.0.1", 0, &port));
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int c = 0; c < 4; ++c)
    clients.emplace_back([&, c] {
      WireStoreClient s("127.0.0.1", server.port(), std::chrono::milliseconds(10000));
      for (int i = 0; i < 300; ++i) {
        std::string mine = "k" + std::to_string(c) + "_" + std::to_string(i);
        s.set(mine, Bytes{static_cast<uint8_t>(i)});
        s.add("counter", 1);
        // Each waits for its neighbour's key of the same round.
        std::string theirs = "k" + std::to_string((c + 1) % 4) + "_" + std::to_string(i);
        s.wait({theirs}, std::chrono::milliseconds(10000));
        if (s.get(theirs) == Bytes{static_cast<uint8_t>(i)}) ++ok;
      }
    });
  for (auto& t : clients) t.join();
  WireStoreClient s("127.0.0.1", server.port(), std::chrono::milliseconds(10000));
  CHECK(s.add("counter", 0) == 1200);
  CHECK(ok == 1200);
}

// One client shared as a group shares its store connection: threads making
// calls, one changing the timeout under them (Group::set_timeout), and at
// the end one shutting the connection down while a wait is in progress
// (a store monitor's end). Every call either answers or fails with a status.
void store_shut_down_race() {
  using namespace ddp::core;
  int port = 0;
  WireStoreServer server(launch::listen_socket("127.0.0.1", 0, &port));
  WireStoreClient s("127.0.0.1", server.port(), std::chrono::milliseconds(10000));
  std::atomic<bool> stop{false};
  std::atomic<int> calls{0}, failed{0};
  std::vector<std::thread> users;
  for (int c = 0; c < 3; ++c)
    users.emplace_back([&, c] {
      for (int i = 0; !stop; ++i) {
        try {
          s.set("u" + std::to_string(c), Bytes{static_cast<uint8_t>(i)});
          s.wait({"never"}, std::chrono::milliseconds(1));
        } catch (const Error&) {
          ++failed;
          if (!s.usable()) return;
        }
        ++calls;
      }
    });
  std::thread timer([&] {
    for (int i = 0; !stop; ++i) s.set_timeout(std::chrono::milliseconds(i % 2 ? 5000 : 10000));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  s.shut_down();
  for (auto& t : users) t.join();
  stop = true;
  timer.join();
  CHECK(calls > 0);
  CHECK(!s.usable());
}

}  // namespace

int main() {
  char dir[] = "/tmp/tsan_flightXXXXXX";
  if (!mkdtemp(dir)) return 2;
  flight_recorder_race(dir);
  store_race();
  store_shut_down_race();
  std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", dir);
  std::printf("tsan_stress: %s\n", failures ? "FAILED" : "every check held");
  return failures ? 1 : 0;
}
