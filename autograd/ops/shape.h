// Differentiable views, joins, splits and indexing. Views share storage with their input (as the raw
// Tensor views do); the gradient of a view is the incoming gradient mapped back to the input's shape.
#pragma once

#include <vector>

#include "tensor/tensor.h"

namespace braid::autograd {

Tensor view(const Tensor& a, const Shape& shape);
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& a, const Shape& dims);
Tensor expand(const Tensor& a, const Shape& shape);
Tensor unsqueeze(const Tensor& a, int64_t dim);
Tensor squeeze(const Tensor& a, int64_t dim);
Tensor flatten(const Tensor& a, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& a, int64_t dim, int64_t index);
Tensor contiguous(const Tensor& a);
// Converts dtype; the gradient is converted back.
Tensor to(const Tensor& a, DType dtype);
// Copies to `device` (the same tensor when already there); the gradient goes back to `a`'s device.
Tensor to(const Tensor& a, Device device);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);

}  // namespace braid::autograd
