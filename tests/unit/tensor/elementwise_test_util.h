// Helpers shared by the elementwise tests: sample tensors per dtype and value comparison.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor/factory.h"
#include "tensor/tensor.h"

namespace braid::test {

// Six values per dtype (shape [2, 3] by default), chosen to hit wrap-around, extremes, signs, zeros and
// fractions. `which` picks one of two sets so that binary ops see different operands.
inline Tensor sample(DType dt, int which, const Shape& shape = {2, 3}) {
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin64 = std::numeric_limits<int64_t>::min();
  std::vector<int64_t> ints;
  std::vector<double> floats;
  switch (dt) {
    case DType::Bool: ints = which == 0 ? std::vector<int64_t>{1, 0, 1, 1, 0, 0} : std::vector<int64_t>{1, 1, 0, 0, 1, 0}; break;
    case DType::UInt8: ints = which == 0 ? std::vector<int64_t>{200, 3, 0, 255, 17, 128} : std::vector<int64_t>{100, 3, 7, 1, 0, 128}; break;
    case DType::Int8: ints = which == 0 ? std::vector<int64_t>{-128, 127, -3, 0, 5, 100} : std::vector<int64_t>{-1, 1, 2, -128, 3, 100}; break;
    case DType::Int32:
      ints = which == 0 ? std::vector<int64_t>{2147483647, -2147483648LL, -7, 0, 12345, 3}
                        : std::vector<int64_t>{1, -1, 3, 0, -12345, 2};
      break;
    case DType::Int64:
      ints = which == 0 ? std::vector<int64_t>{kMax64, kMin64, -7, 0, 123456789012LL, 3}
                        : std::vector<int64_t>{1, -1, 3, 0, -5, 62};
      break;
    default:
      floats = which == 0 ? std::vector<double>{1.5, -2.25, 0.0, 3.0, 1000.5, 0.1}
                          : std::vector<double>{0.5, 2.0, -0.0, 3.0, -1.5, 0.3};
      break;
  }
  std::vector<int64_t> pick_i;
  std::vector<double> pick_f;
  const int64_t n = shape_numel(shape);
  for (int64_t i = 0; i < n; ++i) {
    if (!ints.empty()) pick_i.push_back(ints[static_cast<size_t>(i % 6)]);
    else pick_f.push_back(floats[static_cast<size_t>(i % 6)]);
  }
  // Integer samples go through int64 so that narrowing wraps (a double -> uint8 cast of -1 would be UB).
  if (!ints.empty()) return from_vector<int64_t>(pick_i, shape).to(dt);
  return from_vector<double>(pick_f, shape).to(dt);
}

// Exact comparison of dtype, shape and values (NaN matches NaN); floating values may differ by `rtol`.
inline void check_values(const Tensor& got, const Tensor& want, double rtol = 0) {
  REQUIRE(got.dtype() == want.dtype());
  REQUIRE(got.shape() == want.shape());
  if (!is_floating(got.dtype())) {
    CHECK(to_vector<int64_t>(got) == to_vector<int64_t>(want));
    return;
  }
  const auto g = to_vector<double>(got);
  const auto w = to_vector<double>(want);
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << w[i]);
    if (std::isnan(w[i])) {
      CHECK(std::isnan(g[i]));
    } else if (rtol == 0 || std::isinf(w[i])) {
      CHECK(g[i] == w[i]);
      CHECK(std::signbit(g[i]) == std::signbit(w[i]));
    } else {
      CHECK(std::abs(g[i] - w[i]) <= rtol * std::abs(w[i]) + 1e-300);
    }
  }
}

// Relative tolerance for results that go through libm (float vs double implementations differ by an ulp,
// which can move a 16-bit rounding by one step).
inline double libm_rtol(DType dt) {
  switch (dt) {
    case DType::Float16: return 1e-3;
    case DType::BFloat16: return 8e-3;
    case DType::Float32: return 1e-6;
    default: return 1e-14;
  }
}

}  // namespace braid::test
