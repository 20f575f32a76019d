// Differentiable matrix products.
#pragma once

#include "tensor/tensor.h"

namespace braid::autograd {

Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.matmul semantics (1-D operands, broadcast batch dims).
Tensor matmul(const Tensor& a, const Tensor& b);
// x [*, in] . weight [out, in]^T + bias [out].
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

}  // namespace braid::autograd
