// A file's bytes in and out, for the tests that damage files on purpose.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../../core/common/temporary_name.h"  // the library's own rule (test_capi sees no core headers)

inline std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), {});
}

inline void write_all(const std::string& path, const std::vector<char>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The temporary files saves by process `pid` left beside `path`
// ("<path>.tmp.<pid>.<call>", as write_file_atomically names them, the
// name cut short where it would be too long).
inline std::vector<std::string> temporaries_left(const std::string& path, pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string prefix =
      fs::path(ddp::core::temporary_beside(path, ".tmp." + std::to_string(pid) + ".")).filename().string();
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.has_parent_path() ? p.parent_path() : fs::path("."), ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}
