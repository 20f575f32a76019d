// Helpers shared by the optimizer tests: float64 parameters, setting .grad, reading values back.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "tensor/factory.h"
#include "tensor/sparse.h"

namespace braid::nn::optim::testing {

// A float64 leaf that requires grad.
inline Tensor param(const std::vector<double>& values, const Shape& shape = {}) {
  Tensor t = from_vector(values, shape.empty() ? Shape{static_cast<int64_t>(values.size())} : shape);
  autograd::set_requires_grad(t);
  return t;
}

// Sets p.grad to the given values (float64, p's shape).
inline void give_grad(const Tensor& p, const std::vector<double>& values) {
  autograd::set_grad(p, from_vector(values, p.shape()));
}

inline std::vector<double> values_of(const Tensor& t) {
  return to_vector<double>(t.is_sparse() ? as_sparse(t).to_dense() : t);
}

// Relative-or-absolute closeness, elementwise, with a message naming the first mismatch.
inline void require_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << ": got " << got[i] << ", want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])));
  }
}

inline void require_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-12) {
  require_close(values_of(got), want, tol);
}

}  // namespace braid::nn::optim::testing
