// Sparse COO tensors: int64 indices of shape [sparse_dim, nnz] and values of shape [nnz, dense dims...]
// (hybrid tensors: trailing dense dimensions, as PyTorch's embedding gradients have).
// Used for sparse gradients (embedding_bag sparse=true) and sparse allreduce.
#pragma once

#include "tensor/tensor.h"

namespace braid {

class SparseTensor {
 public:
  SparseTensor() = default;
  // Validates: indices int64 2-D; values.size(0) == nnz; sparse_dim + values.dim() - 1 == size.size();
  // every index within its dimension. Throws InvalidArgument naming what is wrong.
  SparseTensor(Tensor indices, Tensor values, Shape size, bool is_coalesced = false);

  const Tensor& indices() const { return indices_; }
  const Tensor& values() const { return values_; }
  const Shape& shape() const { return size_; }
  int64_t sparse_dim() const { return indices_.size(0); }
  int64_t dense_dim() const { return values_.dim() - 1; }
  int64_t nnz() const { return values_.size(0); }
  DType dtype() const { return values_.dtype(); }
  bool is_coalesced() const { return coalesced_; }
  bool defined() const { return values_.defined(); }

  // Sorted unique indices, duplicate entries summed.
  SparseTensor coalesce() const;
  Tensor to_dense() const;
  // The sum (coalesced); shapes must match; dtypes promote.
  SparseTensor add(const SparseTensor& other) const;
  // dense + this (a new dense tensor).
  Tensor add_to_dense(const Tensor& dense) const;
  SparseTensor mul(Scalar factor) const;
  // The sparse COO form of a dense tensor (all dims sparse; zeros dropped).
  static SparseTensor from_dense(const Tensor& dense);
  std::string describe() const;
  // This sparse tensor behind a Tensor handle (Tensor::is_sparse()), e.g. to flow as a gradient.
  Tensor to_tensor() const;

 private:
  Tensor indices_;
  Tensor values_;
  Shape size_;
  bool coalesced_ = false;
};

// The SparseTensor behind a sparse Tensor handle; throws for a strided tensor.
inline const SparseTensor& as_sparse(const Tensor& t) { return t.sparse(); }
// a + b where either may be sparse: sparse + sparse stays sparse (coalesced), otherwise dense.
Tensor add_maybe_sparse(const Tensor& a, const Tensor& b);

}  // namespace braid
