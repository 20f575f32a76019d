// Statistics shared by the `braid bench ...` commands.
#pragma once

#include <algorithm>
#include <vector>

namespace braid::bench {

// The median of `v`: the middle value, or the mean of the two middle values for an even count; 0 when
// `v` is empty.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace braid::bench
