// Running a process out of file descriptors: every free number below its
// limit (RLIMIT_NOFILE) taken but a few. For a forked child
// (run_in_child, file_size_limit.h): the descriptors are never closed.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <vector>

// Leaves `free` descriptors below this process's limit unopened.
inline void leave_free_descriptors(int free) {
  std::vector<int> fillers;
  for (int f; (f = open("/dev/null", O_RDONLY)) >= 0;) fillers.push_back(f);
  for (int i = 0; i < free && !fillers.empty(); ++i, fillers.pop_back()) close(fillers.back());
}
