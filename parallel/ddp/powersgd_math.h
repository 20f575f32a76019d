// The linear algebra PowerSGD's two hooks (powersgd_hook.h: per gradient and batched) share.
#pragma once

#include "tensor/tensor.h"

namespace braid::parallel {

// PyTorch's _orthogonalize: the columns of `m` [rows, cols] made orthonormal in place by modified
// Gram-Schmidt, each normalized (by its norm plus `epsilon`) and then projected out of the columns after
// it; above two columns (where torch uses QR) a second sweep keeps nearly dependent columns orthogonal.
// A column of zeros stays zeros (with a warning, once) when epsilon is 0.
void powersgd_orthogonalize(const Tensor& m, double epsilon);

}  // namespace braid::parallel
