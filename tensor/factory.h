// Tensor factories: constant fills, ranges, identity, random tensors and tensors from C++ values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/random.h"
#include "tensor/tensor.h"

namespace braid {

Tensor empty(const Shape& shape, TensorOptions options = {});
Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, Scalar value, TensorOptions options = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);

// [start, end) with `step` (non-zero); the default dtype is int64 for integral arguments, as in PyTorch,
// unless options give one.
Tensor arange(Scalar end, TensorOptions options = DType::Int64);
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = DType::Int64);
// n x m identity (m = n when negative).
Tensor eye(int64_t n, int64_t m = -1, TensorOptions options = {});

// Uniform [0, 1), standard normal, and integers in [low, high); from `gen` or the default generator.
// rand/randn need a floating dtype; randint defaults to int64.
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = DType::Int64,
               Generator* gen = nullptr);
// A random permutation of 0..n-1 (int64).
Tensor randperm(int64_t n, Generator* gen = nullptr);

// A tensor holding a copy of `values` with the given shape (1-D when shape is empty and values.size()!=1).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {}, Device device = Device::cpu());
// A 0-dim tensor.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// Copies the elements (in row-major order) out into a vector of T, converting.
template <class T>
std::vector<T> to_vector(const Tensor& t);

// Bytes as a 1-D uint8 tensor and back, so that a state dict can carry them (a generator's state).
// tensor_bytes throws InvalidArgument, naming `what`, for anything but a 1-D uint8 tensor.
Tensor bytes_tensor(std::string_view bytes);
std::string tensor_bytes(const Tensor& t, std::string_view what);

}  // namespace braid
