#include "env/env_vars.h"

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "common/error.h"

namespace ddp::core::envvars {

bool has(const EnvLookup& env, const std::string& name) { return env(name).has_value(); }

std::string get_str(const EnvLookup& env, const std::string& name, const std::string& fallback) {
  auto v = env(name);
  return v ? *v : fallback;
}

std::string require_str(const EnvLookup& env, const std::string& name, const std::string& who) {
  auto v = env(name);
  check_arg(v.has_value(), who + " environment: " + name + " is not set");
  return *v;
}

int parse_int(const std::string& name, const std::string& value, long lo, long hi) {
  const char* s = value.c_str();
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  // strtol accepts leading blanks; we accept surrounding blanks but nothing else.
  while (end && (*end == ' ' || *end == '\t')) ++end;
  bool ok = !value.empty() && end != s && end && *end == '\0' && errno == 0;
  check_arg(ok, name + "='" + value + "' is not an integer");
  check_arg(v >= lo && v <= hi, name + "='" + value + "' is out of range [" + std::to_string(lo) +
                                    ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

int get_int(const EnvLookup& env, const std::string& name, int fallback, long lo, long hi) {
  auto v = env(name);
  return v ? parse_int(name, *v, lo, hi) : fallback;
}

int require_int(const EnvLookup& env, const std::string& name, long lo, long hi, const std::string& who) {
  return parse_int(name, require_str(env, name, who), lo, hi);
}

// 0 is "any free port", which only a one-process job can use (checked with
// the world size in validate_cluster_env).
int parse_port(const std::string& name, const std::string& value) {
  return parse_int(name, value, 0, 65535);
}

}  // namespace ddp::core::envvars
