// Numerical gradient checking: compares the analytical Jacobian (from backward) with central finite
// differences, in float64. Used by every differentiable op's test.
#pragma once

#include <functional>
#include <string>

#include "tensor/tensor.h"

namespace braid::autograd {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};

struct GradcheckResult {
  bool ok = true;
  std::string message;  // on failure: which input, which element, analytical vs numerical
};

// `fn` maps the inputs to one output tensor (any shape). Inputs must be float64 leaves that require grad;
// they may be non-contiguous views (they are perturbed in place and restored).
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace braid::autograd
