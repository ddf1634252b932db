// What a save that runs out of room midway must leave (the disk stood in
// for by a file-size limit, file_size_limit.h): the save fails with
// Status::IO naming the path, the file there is unchanged, and no
// temporary file of the saving process is left beside it.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/error.h"
#include "file_bytes.h"
#include "file_size_limit.h"

// Runs `save` (over the file at `path`, with more than 1 MiB to write) in a
// child limited to 1 MiB files and checks the above. Returns the child's
// report: "IO: " and the error's message.
inline std::string expect_full_disk_keeps_the_old_file(const std::string& path, const std::function<void()>& save) {
  const auto old_bytes = read_all(path);
  const LimitedRun run = run_with_file_size_limit(1 << 20, [&] {
    try {
      save();
    } catch (const ddp::core::Error& e) {
      return (e.status() == ddp::core::Status::IO ? "IO: " : "other status: ") + std::string(e.what());
    }
    return std::string("saved");
  });
  EXPECT_TRUE(run.exited) << run.report;
  EXPECT_EQ(run.report.rfind("IO: ", 0), 0u) << run.report;
  EXPECT_NE(run.report.find(path), std::string::npos) << run.report;
  EXPECT_EQ(read_all(path), old_bytes) << "the old file changed";
  EXPECT_TRUE(temporaries_left(path, run.pid).empty()) << "a temporary file was left";
  return run.report;
}
