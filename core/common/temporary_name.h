// The name of a temporary file that is renamed onto `path` once written.
//
// It lies in path's directory (a rename moves a file within one file
// system only) and is "<path's file name><tag>". A file name as long as the
// directory allows (NAME_MAX, 255 bytes on most file systems) leaves no
// room for the tag: there the start of the name stands for all of it, cut
// short by what the tag needs, so that every name a file may have can be
// saved to.
#pragma once

#include <unistd.h>

#include <climits>
#include <string>

namespace ddp::core {

inline std::string temporary_beside(const std::string& path, const std::string& tag) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const long limit = ::pathconf(dir.empty() ? "." : dir.c_str(), _PC_NAME_MAX);
  const size_t most = limit > 0 ? static_cast<size_t>(limit) : size_t{NAME_MAX};
  if (name.size() + tag.size() > most && most > tag.size()) name.resize(most - tag.size());
  return dir + name + tag;
}

}  // namespace ddp::core
