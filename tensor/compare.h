// Whole-tensor comparisons for tests and checks.
#pragma once

#include "tensor/tensor.h"

namespace braid {

// |a - b| <= atol + rtol * |b| elementwise (after broadcasting), computed in float64.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false);
// Same shape and equal values (dtypes may differ; values compared after promotion).
bool equal(const Tensor& a, const Tensor& b);

}  // namespace braid
