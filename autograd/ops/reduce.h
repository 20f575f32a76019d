// Differentiable reductions.
#pragma once

#include "tensor/tensor.h"

namespace braid::autograd {

// Over `dims` (all when empty), as braid::sum / braid::mean.
Tensor sum(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const Shape& dims = {}, bool keepdim = false);
// The 2-norm of all elements (`output.norm()` in torch's DdpComparisonTest); the gradient at 0 is 0.
Tensor norm(const Tensor& a);

}  // namespace braid::autograd
