// Helpers shared by the autograd tests: float64 leaves, dense values of (possibly sparse) tensors, and a
// gradcheck assertion that prints gradcheck's own explanation on failure.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "autograd/engine.h"
#include "autograd/gradcheck.h"
#include "autograd/variable.h"
#include "tensor/factory.h"
#include "tensor/ops/elementwise.h"
#include "tensor/sparse.h"

namespace braid::autograd::testing {

// A float64 leaf that requires grad, with the given values.
inline Tensor leaf(const std::vector<double>& values, const Shape& shape) {
  Tensor t = from_vector(values, shape);
  set_requires_grad(t);
  return t;
}

// A float64 leaf of standard-normal values from a fixed seed, so failures reproduce.
inline Tensor random_leaf(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randn(shape, DType::Float64, &gen);
  set_requires_grad(t);
  return t;
}

// Values away from 0, for functions whose derivative is undefined or large there (log, sqrt, abs, pow).
inline Tensor positive_leaf(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor t = braid::add(rand(shape, DType::Float64, &gen), 0.5);
  set_requires_grad(t);
  return t;
}

// A non-contiguous float64 leaf of shape [rows, cols]: the transpose of a [cols, rows] tensor. The leaf is
// the view itself, so the ops under test read strided memory directly.
inline Tensor transposed_leaf(int64_t rows, int64_t cols, uint64_t seed) {
  Generator gen(seed);
  Tensor t = randn({cols, rows}, DType::Float64, &gen).transpose(0, 1);
  set_requires_grad(t);
  return t;
}

// A non-contiguous float64 leaf: every other element of the last dimension of a larger tensor.
inline Tensor stepped_leaf(Shape shape, uint64_t seed) {
  Generator gen(seed);
  const int64_t last = shape.back();
  shape.back() = 2 * last;
  Tensor t = randn(shape, DType::Float64, &gen).slice(-1, 0, 2 * last, 2);
  set_requires_grad(t);
  return t;
}

// Row-major values of a tensor; a sparse one is densified first.
inline std::vector<double> values_of(const Tensor& t) {
  return to_vector<double>(t.is_sparse() ? as_sparse(t).to_dense() : t);
}

inline bool all_close(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-9) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(std::abs(a[i] - b[i]) <= tol * (1.0 + std::abs(b[i])))) return false;
  }
  return true;
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Gradchecks `fn` and reports gradcheck's message when it fails.
#define REQUIRE_GRADCHECK(fn, ...)                                                              \
  do {                                                                                          \
    const auto braid_gc_ = ::braid::autograd::gradcheck((fn), std::vector<::braid::Tensor>{__VA_ARGS__}); \
    INFO(braid_gc_.message);                                                                    \
    REQUIRE(braid_gc_.ok);                                                                      \
  } while (0)

}  // namespace braid::autograd::testing
