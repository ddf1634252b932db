#include "model/param_groups.h"

#include <fnmatch.h>

#include "common/error.h"

namespace ddp::core {
namespace {

std::string describe(const ParamGroupSelector& s, size_t index) {
  std::string d = "param group " + std::to_string(index) + " (";
  if (s.patterns.empty()) return d + "the rest)";
  for (size_t i = 0; i < s.patterns.size(); ++i) d += (i ? ", '" : "'") + s.patterns[i] + "'";
  return d + ")";
}

bool matches(const std::string& pattern, const std::string& name) {
  // No FNM_PATHNAME: '*' also matches the dots of a dotted name.
  return fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

std::vector<ParamGroup> select_param_groups(const std::vector<NamedTensor>& named_params,
                                            const std::vector<ParamGroupSelector>& selectors) {
  check_arg(!selectors.empty(), "param groups: none given");
  std::vector<ParamGroup> groups(selectors.size());
  std::vector<int> owner(named_params.size(), -1);
  int rest = -1;
  for (size_t g = 0; g < selectors.size(); ++g) {
    const auto& s = selectors[g];
    groups[g].lr = s.lr;
    groups[g].weight_decay = s.weight_decay;
    groups[g].momentum = s.momentum;
    if (s.patterns.empty()) {
      check_arg(rest < 0, describe(s, g) + ": param group " + std::to_string(rest) + " already takes the rest");
      rest = static_cast<int>(g);
      continue;
    }
    for (const auto& pattern : s.patterns) {
      check_arg(!pattern.empty(), describe(s, g) + ": an empty pattern");
      bool any = false;
      for (size_t i = 0; i < named_params.size(); ++i) {
        if (!matches(pattern, named_params[i].name)) continue;
        any = true;
        if (owner[i] < 0) owner[i] = static_cast<int>(g);
      }
      check_arg(any, describe(s, g) + ": the pattern '" + pattern + "' matches no parameter of the module");
    }
  }
  for (size_t i = 0; i < named_params.size(); ++i) {
    if (owner[i] < 0) {
      check_arg(rest >= 0, "param groups: parameter '" + named_params[i].name +
                               "' is in no group (add a group without patterns for the rest)");
      owner[i] = rest;
    }
    groups[static_cast<size_t>(owner[i])].params.push_back(named_params[i].tensor);
    groups[static_cast<size_t>(owner[i])].names.push_back(named_params[i].name);
  }
  for (size_t g = 0; g < groups.size(); ++g)
    check_arg(!groups[g].params.empty(),
              describe(selectors[g], g) + ": gets no parameter (earlier groups took every one it matches)");
  return groups;
}

}  // namespace ddp::core
