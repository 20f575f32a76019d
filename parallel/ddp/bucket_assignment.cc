#include "parallel/ddp/bucket_assignment.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "base/check.h"

namespace braid::parallel {

namespace {

struct OpenBucket {
  std::vector<size_t> indices;
  size_t bytes = 0;
  size_t limit_index = 0;
};

}  // namespace

BucketAssignment compute_bucket_assignment_by_size(const std::vector<Tensor>& tensors, const std::vector<size_t>& limits,
                                                   const std::vector<bool>& expect_sparse,
                                                   const std::vector<size_t>& order) {
  BRAID_CHECK_ARG(!limits.empty(), "compute_bucket_assignment_by_size: at least one size limit is needed");
  BRAID_CHECK_ARG(expect_sparse.empty() || expect_sparse.size() == tensors.size(),
                  "compute_bucket_assignment_by_size: {} sparse flags for {} tensors", expect_sparse.size(),
                  tensors.size());
  std::vector<size_t> walk = order;
  if (walk.empty()) {
    walk.resize(tensors.size());
    for (size_t i = 0; i < walk.size(); ++i) walk[i] = i;
  }
  BRAID_CHECK_ARG(walk.size() == tensors.size(), "compute_bucket_assignment_by_size: an order of {} indices for {} tensors",
                  walk.size(), tensors.size());
  std::vector<std::pair<std::vector<size_t>, size_t>> closed;  // (indices, limit)
  using Key = std::tuple<int, int, int>;                        // dtype, device type, device index
  std::map<Key, OpenBucket> open;
  std::vector<bool> seen(tensors.size(), false);
  for (size_t i : walk) {
    BRAID_CHECK_ARG(i < tensors.size() && !seen[i], "compute_bucket_assignment_by_size: index {} repeated or out of range", i);
    seen[i] = true;
    const Tensor& t = tensors[i];
    if (!expect_sparse.empty() && expect_sparse[i]) {
      closed.push_back({{i}, limits.front()});
      continue;
    }
    const Key key{static_cast<int>(t.dtype()), static_cast<int>(t.device().type), t.device().index};
    OpenBucket& b = open[key];
    b.indices.push_back(i);
    b.bytes += static_cast<size_t>(t.nbytes());
    const size_t limit = limits[std::min(b.limit_index, limits.size() - 1)];
    if (b.bytes >= limit) {
      closed.push_back({std::move(b.indices), limit});
      b.indices.clear();
      b.bytes = 0;
      ++b.limit_index;
    }
  }
  for (auto& [key, b] : open) {
    if (!b.indices.empty()) closed.push_back({std::move(b.indices), limits[std::min(b.limit_index, limits.size() - 1)]});
  }
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) {
    return *std::min_element(a.first.begin(), a.first.end()) < *std::min_element(b.first.begin(), b.first.end());
  });
  BucketAssignment out;
  for (auto& [indices, limit] : closed) {
    out.buckets.push_back(std::move(indices));
    out.limits.push_back(limit);
  }
  return out;
}

}  // namespace braid::parallel
