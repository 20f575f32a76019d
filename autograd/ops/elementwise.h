// Differentiable elementwise ops. Same semantics as the raw ops in tensor/ops/elementwise.h
// (broadcasting, dtype promotion); gradients are summed back over broadcast dimensions.
#pragma once

#include "tensor/tensor.h"

namespace braid::autograd {

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor neg(const Tensor& a);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor relu(const Tensor& a);
// tanh-free exact GELU: x * Phi(x), Phi the standard normal CDF.
Tensor gelu(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);

}  // namespace braid::autograd
