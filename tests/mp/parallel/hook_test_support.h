// What the comm-hook tests share: GradBuckets built by hand (a flat buffer with per-parameter views, as
// the Reducer makes them), rank-dependent gradient values whose exact average the test computes in
// double, and error measures.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "parallel/ddp/comm_hook.h"
#include "tensor/factory.h"
#include "tensor/tensor.h"

namespace braid::mp {

// A bucket whose buffer holds gradients of `shapes`, back to back, with values value(i) for element i of
// the buffer (stored in `dtype`).
inline parallel::GradBucket make_bucket(const std::vector<Shape>& shapes, const std::function<double(int64_t)>& value,
                                        DType dtype = DType::Float32, size_t index = 0, bool is_last = true,
                                        size_t num_buckets = 1) {
  int64_t total = 0;
  for (const Shape& s : shapes) total += shape_numel(s);
  std::vector<double> values(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) values[static_cast<size_t>(i)] = value(i);
  Tensor buffer = from_vector<double>(values, {total}).to(dtype);
  std::vector<Tensor> grads, params;
  int64_t at = 0;
  for (const Shape& s : shapes) {
    grads.push_back(buffer.narrow(0, at, shape_numel(s)).view(s));
    params.push_back(zeros(s, dtype));
    at += shape_numel(s);
  }
  return parallel::GradBucket(index, num_buckets, buffer, grads, params, is_last);
}

// The values a rank contributes and their exact average over `ws` ranks, both computed in double from the
// values as stored in `dtype` (so the expectation is the true average of what the ranks actually send).
struct RankValues {
  std::function<double(int, int64_t)> value;  // (rank, element) -> value
  DType dtype = DType::Float32;

  double stored(int rank, int64_t i) const {
    return to_vector<double>(from_vector<double>({value(rank, i)}, {1}).to(dtype))[0];
  }
  std::vector<double> average(int ws, int64_t n) const {
    std::vector<double> avg(static_cast<size_t>(n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int r = 0; r < ws; ++r) s += stored(r, i);
      avg[static_cast<size_t>(i)] = s / ws;
    }
    return avg;
  }
};

// max |got - want| over the elements (got converted to double).
inline double max_abs_error(const Tensor& got, const std::vector<double>& want) {
  const std::vector<double> g = to_vector<double>(got);
  double worst = 0;
  for (size_t i = 0; i < g.size() && i < want.size(); ++i) worst = std::max(worst, std::abs(g[i] - want[i]));
  return g.size() == want.size() ? worst : INFINITY;
}

// Whether |got - want| <= atol + rtol * |want| everywhere.
inline bool all_close(const Tensor& got, const std::vector<double>& want, double rtol, double atol) {
  const std::vector<double> g = to_vector<double>(got);
  if (g.size() != want.size()) return false;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!(std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i]))) return false;
  }
  return true;
}

// Measured errors go to stdout on rank 0 when BRAID_HOOKS_REPORT is set (the numbers in parallel/README.md).
inline void report(int rank, const std::string& line) {
  if (rank == 0 && std::getenv("BRAID_HOOKS_REPORT") != nullptr) {
    std::printf("[hooks] %s\n", line.c_str());
    std::fflush(stdout);
  }
}

}  // namespace braid::mp
