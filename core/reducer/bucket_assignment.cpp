#include "reducer/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <utility>

#include "common/error.h"

namespace ddp::core {

BucketAssignment compute_bucket_assignment(const std::vector<TensorInfo>& tensors,
                                           const std::vector<size_t>& limits,
                                           const std::vector<size_t>& order) {
  check_arg(!limits.empty(), "bucket size limits are empty");
  struct Open {
    std::vector<size_t> indices;
    size_t bytes = 0;
    size_t limit_index = 0;  // into `limits`, advanced when a bucket closes
  };
  using Key = std::pair<int, int>;
  std::map<Key, Open> open;
  std::vector<Key> key_order;  // first appearance: where leftovers are emitted
  BucketAssignment out;

  std::vector<size_t> walk = order;
  if (walk.empty())
    for (size_t i = 0; i < tensors.size(); ++i) walk.push_back(i);
  for (size_t i : walk) {
    check_arg(i < tensors.size(), "bucket order names tensor " + std::to_string(i) + " of " +
                                      std::to_string(tensors.size()));
    Key key{tensors[i].dtype, tensors[i].device};
    auto [it, inserted] = open.try_emplace(key);
    if (inserted) key_order.push_back(key);
    Open& b = it->second;
    b.indices.push_back(i);
    b.bytes += tensors[i].bytes;
    size_t limit = limits[b.limit_index];
    if (b.bytes >= limit) {
      out.buckets.push_back(std::move(b.indices));
      out.size_limits.push_back(limit);
      b.indices.clear();
      b.bytes = 0;
      if (b.limit_index + 1 < limits.size()) ++b.limit_index;
    }
  }
  for (const Key& key : key_order) {
    Open& b = open[key];
    if (b.indices.empty()) continue;
    out.buckets.push_back(std::move(b.indices));
    out.size_limits.push_back(limits[b.limit_index]);
  }
  if (order.empty()) {
    std::vector<size_t> perm(out.buckets.size());
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = i;
    std::stable_sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
      return *std::min_element(out.buckets[a].begin(), out.buckets[a].end()) <
             *std::min_element(out.buckets[b].begin(), out.buckets[b].end());
    });
    BucketAssignment sorted;
    for (size_t p : perm) {
      sorted.buckets.push_back(out.buckets[p]);
      sorted.size_limits.push_back(out.size_limits[p]);
    }
    return sorted;
  }
  return out;
}

}  // namespace ddp::core