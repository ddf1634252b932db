// Reading typed values from environment variables with messages that name
// the variable and its value.
#pragma once

#include <string>

#include "env/cluster_env.h"

namespace ddp::core::envvars {

bool has(const EnvLookup& env, const std::string& name);
std::string get_str(const EnvLookup& env, const std::string& name, const std::string& fallback);
// Throws Status::InvalidArgument naming the variable when it is missing.
std::string require_str(const EnvLookup& env, const std::string& name, const std::string& who);
// Parses a base-10 integer in [lo, hi]; throws naming `name` and the value.
int parse_int(const std::string& name, const std::string& value, long lo, long hi);
int get_int(const EnvLookup& env, const std::string& name, int fallback, long lo, long hi);
int require_int(const EnvLookup& env, const std::string& name, long lo, long hi, const std::string& who);
int parse_port(const std::string& name, const std::string& value);

}  // namespace ddp::core::envvars
